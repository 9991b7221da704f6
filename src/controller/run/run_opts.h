/*
 * run_opts.h - the options of `stepscope run`, as its command front-end
 * parsed and checked them: one structure, filled once before anything
 * starts, then read (const) by the controller of node 0 (run.h) and by a
 * node agent (agent.h) alike.
 *
 * The front-end (the command's parser) owns the structure and the strings
 * it points to (they point into argv); nothing the run starts writes it.
 * What the run changes while it goes (the store's path once defaulted,
 * the aggregator's host provider, the injector's fired faults) it keeps in
 * its own state, copied from here.
 */
#ifndef STEPSCOPE_RUN_OPTS_H
#define STEPSCOPE_RUN_OPTS_H

#include <stdint.h>

#include "aggregator.h"
#include "hang.h"
#include "health.h"
#include "inject.h"
#include "nodeconf.h"
#include "rank_env.h"
#include "restart.h"

/* What `stepscope run` does on a hang besides recording the finding
 * (--on-hang). */
typedef enum {
    SS_ON_HANG_DUMP = 0,
    SS_ON_HANG_STOP = 1,
    SS_ON_HANG_RESTART = 2 /* stop the attempt; restart (restart.h) */
} ss_on_hang;

/* The job's exit status after --on-hang stop ended it (docs/debug.md). */
#define SS_HANG_EXIT_STATUS 124

/* What `stepscope run` does on a nonfinite finding besides recording it
 * and every rank's stacks (--on-nonfinite, run_numerics.c). */
typedef enum {
    SS_ON_NONFINITE_DUMP = 0,
    SS_ON_NONFINITE_STOP = 1,
    SS_ON_NONFINITE_RESTART = 2 /* restart with --numerics full, once */
} ss_on_nonfinite;

/* The job's exit status after --on-nonfinite ended it (sysexits.h's
 * EX_DATAERR; docs/numerics.md). */
#define SS_NONFINITE_EXIT_STATUS 65

/* What `stepscope run` does on a replica_divergence finding besides
 * recording it (--on-divergence, run_replica.c). */
typedef enum {
    SS_ON_DIVERGENCE_DUMP = 0,
    SS_ON_DIVERGENCE_STOP = 1,
    SS_ON_DIVERGENCE_RESTART = 2
} ss_on_divergence;

/* The job's exit status after --on-divergence stop ended it (as for a
 * non-finite value: the training's data went wrong). */
#define SS_DIVERGENCE_EXIT_STATUS SS_NONFINITE_EXIT_STATUS

/* Ranks a --replica-groups may name. */
#define SS_REPLICA_MAX_RANKS 65536

/* The largest world (--nnodes x -n) a run accepts. */
#define SS_RUN_MAX_WORLD 131072

/* --aggregate (docs/multinode.md, "Node aggregation"): by rank at the
 * controller only, or by node at each agent as well.  Unset, a multi-node
 * run aggregates by node above SS_AGGREGATE_NODE_ABOVE ranks; a single
 * node always by rank. */
#define SS_AGGREGATE_DEFAULT (-1)
#define SS_AGGREGATE_RANK 0
#define SS_AGGREGATE_NODE 1
#define SS_AGGREGATE_NODE_ABOVE 4096
/* Node aggregation stores about this many ranks' rows a step
 * (ss_store_config.rank_rows_per_step; docs/store.md). */
#define SS_AGGREGATE_NODE_ROWS 4096
/* A world above SS_AGGREGATE_NODE_ABOVE ranks, in either mode, has its
 * ranks' totals written this often (ss_store_config.totals_interval_ms). */
#define SS_LARGE_WORLD_TOTALS_MS 5000

/* Not to be copied: master_addr and job_id may point into conf. */
typedef struct {
    /* the job */
    char **argv;             /* the command, NULL-terminated */
    uint32_t nprocs;         /* the world: nnodes x nproc_local */
    uint32_t nproc_local;    /* -n: ranks per node */
    const char *name;        /* --name; NULL: from the command */
    const char *db_path;     /* --db; NULL: the default store */
    const char *log_dir;     /* --log-dir; NULL: beside the store */
    uint32_t grace_ms;       /* --grace */
    uint32_t connect_timeout_ms; /* --connect-timeout */
    int quiet;               /* -q */
    uint8_t *echo_mask;      /* per local rank, the streams shown
                                (torchrun's --redirects, --tee,
                                --local-ranks-filter; launcher.h), the
                                front-end's to free; NULL: all */
    const char *role;        /* --role: ROLE_NAME; NULL: "default" */
    const char *http_addr;   /* --http ADDR:PORT (checked); NULL: default */
    int no_http;             /* --no-http */
    int auto_mode;           /* --auto: instrument PyTorch scripts */
    uint32_t host_interval_ms; /* --host-interval; 0: no host evidence */
    ss_aggregator_config agg_cfg; /* --window, --set */
    /* what findings do */
    ss_hang_config hang_cfg; /* --hang-timeout */
    int hang_off;            /* --hang-timeout 0 */
    ss_on_hang on_hang;      /* --on-hang */
    const char *numerics;    /* --numerics off|light|full (--auto); NULL */
    ss_on_nonfinite on_nonfinite;   /* --on-nonfinite */
    ss_on_divergence on_divergence; /* --on-divergence */
    ss_replica_opts replica; /* --checksum-every, --checksum,
                                --replica-groups */
    /* attempts, health checks, injected faults */
    ss_restart_config restart_cfg; /* --max-restarts and friends */
    ss_health_config health_cfg;   /* --checkpoint-dir, --min-free-gb, ... */
    ss_inject_plan inject;         /* --inject (none fired) */
    /* the nodes (nodeconf.h); nnodes 1: a single-node run */
    ss_node_flags node_flags; /* as typed */
    ss_node_conf conf;        /* resolved */
    uint32_t nnodes;
    uint16_t master_port;     /* MASTER_PORT (0: a free one, single node) */
    const char *master_addr;  /* NULL: 127.0.0.1 */
    uint16_t controller_port;
    const char *token_file;   /* --token-file */
    const char *job_id;       /* "none" when not given */
    uint32_t join_timeout_ms;      /* --join-timeout */
    uint32_t heartbeat_timeout_ms; /* --heartbeat-timeout */
    int aggregate;            /* --aggregate: SS_AGGREGATE_*, resolved */
} ss_run_opts;

/* Fills O with the defaults of every option (nothing parsed yet). */
void ss_run_opts_defaults(ss_run_opts *o);

#endif
