/*
 * run_opts.c - the defaults of `stepscope run`'s options (run_opts.h), in
 * one place for the front-end and for tests that build options by hand.
 */
#include "run_opts.h"

#include <string.h>

#include "launcher.h"
#include "host_watch.h"

void ss_run_opts_defaults(ss_run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->grace_ms = SS_LAUNCH_GRACE_MS_DEFAULT;
    o->connect_timeout_ms = 60000;
    o->host_interval_ms = SS_HOST_WATCH_INTERVAL_MS_DEFAULT;
    ss_aggregator_config_defaults(&o->agg_cfg);
    o->join_timeout_ms = 300000;
    o->heartbeat_timeout_ms = 10000;
    o->aggregate = SS_AGGREGATE_DEFAULT;
    o->restart_cfg.backoff_ms = SS_RESTART_BACKOFF_MS_DEFAULT;
    ss_health_config_defaults(&o->health_cfg);
    ss_hang_config_defaults(&o->hang_cfg);
}
