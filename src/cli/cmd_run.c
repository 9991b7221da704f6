/*
 * cmd_run.c - the `stepscope run` command's front-end: parses and checks
 * its options once into a run_opts.h structure, which the run then only
 * reads; node 0 runs the controller (run.h), every other node of a
 * multi-node run an agent (cmd_agent.c).
 *
 * Every message and exit status of a bad command line is this file's:
 * 2 for a usage error, 0 after --help or --set help.
 */
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_suggest.h"
#include "detectors.h"
#include "gpu_backend.h"
#include "host_watch.h"
#include "http.h"
#include "launcher.h"
#include "numparse.h"
#include "run.h"
#include "run_opts.h"
#include "torchrun_args.h"

/* getopt codes of the replica options. */
enum {
    SS_OPT_CHECKSUM_EVERY = 0x140,
    SS_OPT_CHECKSUM,
    SS_OPT_REPLICA_GROUPS,
    SS_OPT_ON_DIVERGENCE
};

/* Whether TEXT is a list of replica groups: rank lists "a,b-c" joined by
 * ';', no rank twice, every rank below NPROCS (0: not known yet). */
static int groups_ok(const char *text, char *err, size_t errlen)
{
    static unsigned char seen[SS_REPLICA_MAX_RANKS];
    memset(seen, 0, sizeof seen);
    const char *p = text;
    int any = 0;
    if (strlen(text) > SS_RANK_ENV_MAX_GROUPS) {
        snprintf(err, errlen, "longer than %d characters",
                 SS_RANK_ENV_MAX_GROUPS);
        return 0;
    }
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p || a < 0) {
            snprintf(err, errlen, "bad rank at '%s'", p);
            return 0;
        }
        p = end;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a) {
                snprintf(err, errlen, "bad rank range at '%s'", p);
                return 0;
            }
            p = end;
        }
        if (b >= SS_REPLICA_MAX_RANKS) {
            snprintf(err, errlen, "rank %ld is beyond %d", b,
                     SS_REPLICA_MAX_RANKS - 1);
            return 0;
        }
        for (long r = a; r <= b; r++) {
            if (seen[r]) {
                snprintf(err, errlen, "rank %ld is in two groups", r);
                return 0;
            }
            seen[r] = 1;
        }
        any = 1;
        if (*p == ',' || *p == ';')
            p++;
        else if (*p) {
            snprintf(err, errlen, "unexpected '%c'", *p);
            return 0;
        }
    }
    if (!any)
        snprintf(err, errlen, "no rank");
    return any;
}

/* Applies replica option OPT (OPT_*) with ARG; returns 0, or -1 after
 * saying why on stderr. */
static int replica_option(ss_run_opts *o, int opt, const char *arg)
{
    char err[128] = "";
    switch (opt) {
    case SS_OPT_CHECKSUM_EVERY: {
        char *end;
        long n = strtol(arg, &end, 10);
        if (strcmp(arg, "auto") != 0 &&
            (end == arg || *end || n < 0 || n > 1000000000)) {
            fprintf(stderr, "stepscope run: --checksum-every wants auto or a "
                    "count of steps >= 0 (0: off), not '%s'\n", arg);
            return -1;
        }
        o->replica.checksum_every = arg;
        return 0;
    }
    case SS_OPT_CHECKSUM:
        if (strcmp(arg, "params") != 0 && strcmp(arg, "optimizer") != 0) {
            fprintf(stderr, "stepscope run: --checksum wants params or "
                    "optimizer, not '%s'\n", arg);
            return -1;
        }
        o->replica.checksum = arg;
        return 0;
    case SS_OPT_REPLICA_GROUPS:
        if (!groups_ok(arg, err, sizeof err)) {
            fprintf(stderr, "stepscope run: --replica-groups '%s': %s (ranks "
                    "and ranges joined by ',', groups by ';': \"0,1;2-3\")\n",
                    arg, err);
            return -1;
        }
        o->replica.replica_groups = arg;
        return 0;
    case SS_OPT_ON_DIVERGENCE:
        if (strcmp(arg, "dump") == 0)
            o->on_divergence = SS_ON_DIVERGENCE_DUMP;
        else if (strcmp(arg, "stop") == 0)
            o->on_divergence = SS_ON_DIVERGENCE_STOP;
        else if (strcmp(arg, "restart") == 0)
            o->on_divergence = SS_ON_DIVERGENCE_RESTART;
        else {
            fprintf(stderr, "stepscope run: --on-divergence wants dump, stop "
                    "or restart, not '%s'\n", arg);
            return -1;
        }
        return 0;
    }
    return -1;
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: stepscope run [-n N] [options] [--] CMD ARGS...\n"
        "\n"
        "Launches N ranks of CMD with the environment torchrun sets (RANK,\n"
        "LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...), records every\n"
        "step through libstepscope, and stores steps and findings.\n"
        "\n"
        "options:\n"
        "  -n, --nproc-per-node N   ranks on this node (default 1, as\n"
        "                           torchrun); cpu: one per CPU, gpu: one\n"
        "                           per GPU, auto: gpu where there is one,\n"
        "                           else cpu\n"
        "      --name NAME          a name for the run (default: the command)\n"
        "      --db PATH            the store (default: $XDG_DATA_HOME/\n"
        "                           stepscope/stepscope.db); postgresql://\n"
        "                           USER@HOST/DB: recorded into the default\n"
        "                           store and copied into that team\n"
        "                           database as the run goes (docs/store.md)\n"
        "      --log-dir DIR        per-rank logs (default: beside the store,\n"
        "                           PATH.d/logs/run-ID/rank-N.log)\n"
        "      --grace SECONDS      SIGTERM to SIGKILL delay (default 5)\n"
        "      --connect-timeout SECONDS\n"
        "                           a rank silent this long is recorded as\n"
        "                           missing (default 60)\n"
        "      --window STEPS       open steps kept in memory, waiting for the\n"
        "                           slowest rank (default: up to 1024, past 64\n"
        "                           while their rows fit 64 MiB)\n"
        "      --set NAME=VALUE     set a detector threshold (see\n"
        "                           docs/detectors.md; --set help lists them)\n"
        "      --auto               instrument unmodified PyTorch scripts: data\n"
        "                           wait, forward, backward, optimizer step,\n"
        "                           DDP all-reduce and memory (needs the\n"
        "                           stepscope Python package, docs/python.md)\n"
        "      --http ADDR:PORT     serve the dashboard, JSON API and /metrics\n"
        "                           there (default 127.0.0.1:%d, another free\n"
        "                           port when busy; any address but loopback\n"
        "                           requires the run token: docs/api.md)\n"
        "      --no-http            no HTTP server\n"
        "      --host-interval MS   read each rank's process tree and cgroup\n"
        "                           (CPU, run-queue delay, stops, throttling,\n"
        "                           faults) every MS ms and at each step\n"
        "                           (default %d; 0: no host evidence)\n"
        "      --hang-timeout SECONDS\n"
        "                           a hang: no step completed by every rank\n"
        "                           for this long (default: adaptive, 10 x\n"
        "                           p99 of recent step times, at least 30;\n"
        "                           600 before the first step until a rank\n"
        "                           shows work, then a given one; 0: off;\n"
        "                           docs/debug.md)\n"
        "      --on-hang dump|stop|restart\n"
        "                           on a hang: record it and keep waiting\n"
        "                           (dump, the default), also end the job\n"
        "                           with exit status %d (stop), or end the\n"
        "                           attempt and restart (needs --max-restarts)\n"
        "      --numerics off|light|full\n"
        "                           with --auto, what the training computes\n"
        "                           (docs/numerics.md): light (the default)\n"
        "                           loss, gradient and parameter norms and\n"
        "                           non-finite counts; full also per-module\n"
        "                           outputs and per-parameter gradients, and\n"
        "                           where the first NaN or infinity was born\n"
        "      --on-nonfinite dump|stop|restart\n"
        "                           on the first non-finite value: store\n"
        "                           every rank's stacks with the finding\n"
        "                           (dump, the default), also end the job\n"
        "                           with exit status %d (stop), or restart\n"
        "                           from the last checkpoint with --numerics\n"
        "                           full to find its origin, once (needs\n"
        "                           --max-restarts)\n"
        "      --checksum-every N|auto\n"
        "                           with --auto, hash every parameter after\n"
        "                           the optimizer step of every Nth step (0\n"
        "                           off; auto, the default, keeps the cost\n"
        "                           under 1 %% of a step; docs/consistency.md)\n"
        "      --checksum params|optimizer\n"
        "                           optimizer: also hash its state\n"
        "      --replica-groups \"0,1;2-3\"\n"
        "                           the ranks that hold the same parameters\n"
        "                           (default: DDP's group, every rank)\n"
        "      --on-divergence dump|stop|restart\n"
        "                           on a replica_divergence: record it (dump,\n"
        "                           the default), also end the job with exit\n"
        "                           status %d (stop), or end the attempt for\n"
        "                           --max-restarts to restart it (restart)\n"
        "\n"
        "restarts (docs/fault-tolerance.md):\n"
        "      --max-restarts N     restart the whole job up to N times after\n"
        "                           a rank failure, a hang (--on-hang restart)\n"
        "                           or a lost node (default 0, as torchrun)\n"
        "      --restart-backoff SECONDS\n"
        "                           wait before the first restart, doubling\n"
        "                           for each next one up to %d s (default 1)\n"
        "      --max-restarts-per-hour N\n"
        "                           at most N restarts within any hour\n"
        "                           (default: no limit)\n"
        "\n"
        "health checks before the ranks start, on every node\n"
        "(docs/fault-tolerance.md):\n"
        "      --checkpoint-dir DIR where checkpoints are written (default:\n"
        "                           the working directory)\n"
        "      --min-free-gb GB     fail with less free space there (default\n"
        "                           %g; 0: no check)\n"
        "      --health-check CMD   a site check run by /bin/sh; a non-zero\n"
        "                           exit fails (its output is kept)\n"
        "      --health-check-timeout SECONDS\n"
        "                           CMD fails after this long (default %d)\n"
        "      --no-gpu-check       skip the GPUs' check (NVML: every GPU\n"
        "                           readable, none with uncorrected ECC or\n"
        "                           Xid errors; skipped without NVML)\n"
        "  (and node 0's master port must be free when it is fixed)\n"
        "\n"
        "fault injection, to test a resume path (repeatable):\n"
        "      --inject kill-rank:R@STEP   SIGKILL rank R at step STEP\n"
        "      --inject kill-node:K@STEP   SIGKILL every rank of node K\n"
        "      --inject hang-rank:R@STEP   SIGSTOP rank R for good (a hang)\n"
        "      --inject stop-rank:R:MS[@STEP]\n"
        "                           SIGSTOP rank R for MS ms, then SIGCONT\n"
        "                           (at its start, or at STEP)\n"
        "\n"
        "multi-node (the same command on every node; docs/multinode.md):\n"
        "      --nnodes N           nodes in the job (default 1; Slurm's\n"
        "                           SLURM_NNODES or PET_NNODES when set)\n"
        "      --node-rank K        this node (0 runs the controller; others\n"
        "                           run an agent; SLURM_NODEID, PET_NODE_RANK)\n"
        "      --master-addr HOST   node 0's address (first host of\n"
        "                           SLURM_JOB_NODELIST, PET_MASTER_ADDR)\n"
        "      --master-port PORT   the ranks' MASTER_PORT (default 29500)\n"
        "      --controller-port PORT\n"
        "                           where node 0 listens for agents (default\n"
        "                           master port + 1)\n"
        "      --token-file FILE    the shared secret of the agent links (or\n"
        "                           STEPSCOPE_TOKEN); required with --nnodes > 1\n"
        "      --job-id ID          the same on every node (default\n"
        "                           SLURM_JOB_ID, PET_RDZV_ID)\n"
        "      --join-timeout SECONDS\n"
        "                           a node not joined by then is lost (300)\n"
        "      --heartbeat-timeout SECONDS\n"
        "                           a silent link is lost after this (10)\n"
        "      --aggregate rank|node\n"
        "                           fold the ranks' records at the controller\n"
        "                           only, or per node at each agent as well\n"
        "                           (default: node above 4096 ranks)\n"
        "\n"
        "torchrun's spellings (a command line written for torchrun runs):\n"
        "      --nproc_per_node, --node_rank, --master_addr, --master_port,\n"
        "      --max_restarts, --log_dir (and the _ form of each torchrun\n"
        "      option below)        as their --x-y forms\n"
        "      --standalone         one node (no Slurm or PET_ nodes)\n"
        "  -m, --module             CMD is a Python module: python -m CMD\n"
        "      --no-python          run CMD as it is, even a FILE.py\n"
        "      --rdzv-backend static|c10d|etcd|etcd-v2, --rdzv-endpoint\n"
        "      HOST[:PORT], --rdzv-id ID, --rdzv-conf join_timeout=S\n"
        "                           across nodes a static or c10d endpoint\n"
        "                           is node 0 (c10d: its port the\n"
        "                           controller's); c10d without --node-rank:\n"
        "                           the endpoint's host is node 0, the\n"
        "                           others numbered as they join (is_host=\n"
        "                           true|false in --rdzv-conf says it)\n"
        "  -r, --redirects N|R:N,.. -t, --tee N|R:N,..\n"
        "                           1 stdout, 2 stderr, 3 both: redirected\n"
        "                           and not teed, not shown (always logged)\n"
        "      --local-ranks-filter R,...\n"
        "                           show only these local ranks' output\n"
        "      --role NAME          ROLE_NAME (default: default)\n"
        "      --monitor-interval, --start-method, --local-addr\n"
        "                           taken, without effect\n"
        "\n"
        "  -q, --quiet              do not forward rank output (still logged)\n"
        "  -h, --help               this text\n"
        "\n"
        "The exit status is the last attempt's: 0, or that of the rank that\n"
        "failed first; 128 + the signal when the job was stopped (130 for\n"
        "Ctrl-C, 143 for SIGTERM), whatever the ranks' own codes.  A job that\n"
        "fails before its first step twice in a row the same way is not\n"
        "restarted again.  A CMD named FILE.py runs with the Python on PATH.\n",
        SS_HTTP_DEFAULT_PORT, SS_HOST_WATCH_INTERVAL_MS_DEFAULT,
        SS_HANG_EXIT_STATUS, SS_NONFINITE_EXIT_STATUS,
        SS_DIVERGENCE_EXIT_STATUS, SS_RESTART_BACKOFF_MAX_MS / 1000,
        SS_HEALTH_MIN_FREE_GB_DEFAULT, SS_HEALTH_TIMEOUT_MS_DEFAULT / 1000);
}

static void list_params(void)
{
    printf("detector thresholds (--set NAME=VALUE):\n");
    for (const ss_detector_param *p = ss_detector_params; p->name; p++)
        printf("  %-36s %10g %-8s %s\n", p->name, p->default_value,
               p->unit ? p->unit : "", p->doc);
}

/* A whole number from 0 to MAX, exactly as typed ("4", not " 4", "4.0"
 * or "+4"). */
static int parse_count(const char *s, uint32_t max, uint32_t *out)
{
    int64_t v;
    if (ss_parse_i64(s, 0, max, &v))
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Seconds as typed, with up to three decimals ("10", "0.5", "2.125"), into
 * milliseconds up to MAX_MS. */
static int parse_seconds_ms(const char *s, uint32_t max_ms, uint32_t *out)
{
    const char *dot = strchr(s, '.');
    char whole[24];
    size_t n = dot ? (size_t)(dot - s) : strlen(s);
    if (n == 0 || n >= sizeof whole)
        return -1;
    memcpy(whole, s, n);
    whole[n] = '\0';
    int64_t sec, frac = 0;
    if (ss_parse_i64(whole, 0, max_ms / 1000 + 1, &sec))
        return -1;
    if (dot) {
        size_t digits = strlen(dot + 1);
        if (digits == 0 || digits > 3 || dot[1] == '-' ||
            ss_parse_i64(dot + 1, 0, 999, &frac))
            return -1;
        for (size_t i = digits; i < 3; i++)
            frac *= 10;
    }
    int64_t ms = sec * 1000 + frac;
    if (ms > max_ms)
        return -1;
    *out = (uint32_t)ms;
    return 0;
}

/* Whether WORD is one of torchrun's words for a number of ranks. */
static int is_ranks_word(const char *word)
{
    return strcmp(word, "cpu") == 0 || strcmp(word, "gpu") == 0 ||
           strcmp(word, "auto") == 0;
}

/* torchrun's words for a number of ranks (is_ranks_word), as torchrun
 * reads them: the count into *N, the same as text into TEXT (for the node
 * settings); 0, or -1 having said why not, naming the value as WHAT
 * ("-n", "PET_NPROC_PER_NODE="). */
static int ranks_of_word(const char *what, const char *word, uint32_t *n,
                         char *text, size_t len)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t gpus = 0;
    if (strcmp(word, "gpu") == 0 || strcmp(word, "auto") == 0) {
        ss_gpu_backend *b = ss_gpu_backend_open(NULL, NULL);
        gpus = b ? ss_gpu_backend_count(b) : 0;
        ss_gpu_backend_close(b);
    }
    if (strcmp(word, "gpu") == 0 && gpus == 0) {
        fprintf(stderr, "stepscope run: %s%sgpu: no GPU found on this node "
                "(`stepscope gpus` says why); give a number of ranks\n", what,
                what[strlen(what) - 1] == '=' ? "" : " ");
        return -1;
    }
    *n = gpus ? gpus : (uint32_t)(cpus > 0 ? cpus : 1);
    if (strcmp(word, "cpu") == 0)
        *n = (uint32_t)(cpus > 0 ? cpus : 1);
    if (*n > SS_LAUNCH_MAX_RANKS)
        *n = SS_LAUNCH_MAX_RANKS;
    snprintf(text, len, "%" PRIu32, *n);
    return 0;
}

/* Where this node stands in the job: flags, then Slurm's and torchrun's
 * (PET_*) variables (nodeconf.h), said once when there is more than one
 * node.  A node left to a c10d rendezvous's numbering is node 0 where
 * IS_HOST says so (torchrun's --rdzv-conf is_host; -1: not said) or,
 * unsaid, where the master address (the endpoint's host) is this
 * machine's; any other node is numbered by the controller as it joins.
 * Returns 0, or 2 on a usage error. */
static int resolve_nodes(ss_run_opts *o, int is_host)
{
    extern char **environ;
    char err[300];
    /* torchrun's words in PET_NPROC_PER_NODE (a Kubeflow TrainJob's is
     * auto by default), counted here as -n's are */
    static char pet_text[16];
    const char *pet = getenv("PET_NPROC_PER_NODE");
    int pet_word = !o->node_flags.nproc_per_node && pet && is_ranks_word(pet);
    if (pet_word) {
        uint32_t n;
        if (ranks_of_word("PET_NPROC_PER_NODE=", pet, &n, pet_text,
                          sizeof pet_text) != 0)
            return 2;
        o->node_flags.nproc_per_node = pet_text;
    }
    if (ss_nodeconf_resolve(&o->node_flags, environ, &o->conf, err,
                            sizeof err) != 0) {
        fprintf(stderr, "stepscope run: %s\n", err);
        return 2;
    }
    if (pet_word)
        o->conf.nproc_from = (ss_node_origin){SS_NODE_FROM_PET,
                                              "PET_NPROC_PER_NODE"};
    if (o->conf.node_rank == SS_NODECONF_RANK_AT_JOIN &&
        (is_host == 1 ||
         (is_host < 0 && ss_torchrun_is_host(o->conf.master_addr)))) {
        o->conf.node_rank = 0;
        o->conf.node_rank_from = (ss_node_origin){
            SS_NODE_FROM_JOIN, is_host == 1
                                   ? "--rdzv-conf is_host"
                                   : "the c10d endpoint, this host"};
    }
    if (o->conf.nproc_per_node == 0)
        o->conf.nproc_per_node = 1; /* torchrun's default */
    o->nproc_local = o->conf.nproc_per_node;
    o->nnodes = o->conf.nnodes;
    if ((uint64_t)o->nnodes * o->nproc_local > SS_RUN_MAX_WORLD) {
        fprintf(stderr, "stepscope run: %u nodes of %u ranks is more than "
                "%d ranks\n", o->nnodes, o->nproc_local, SS_RUN_MAX_WORLD);
        return 2;
    }
    o->nprocs = o->nnodes * o->nproc_local;
    if (o->nnodes == 1)
        o->aggregate = SS_AGGREGATE_RANK;
    else if (o->aggregate == SS_AGGREGATE_DEFAULT)
        o->aggregate = o->nprocs > SS_AGGREGATE_NODE_ABOVE
                           ? SS_AGGREGATE_NODE
                           : SS_AGGREGATE_RANK;
    o->master_port = o->conf.master_port;
    o->controller_port = o->conf.controller_port;
    o->master_addr = o->conf.master_addr[0] ? o->conf.master_addr : NULL;
    o->job_id = o->conf.job_id[0] ? o->conf.job_id : "none";
    if (o->nnodes > 1) {
        char line[600];
        ss_nodeconf_describe(&o->conf, line, sizeof line);
        fprintf(stderr, "stepscope: %s\n", line);
    }
    return 0;
}

/* One line for an option getopt refused (C: '?' unknown, ':' without its
 * value; the option is ARGV[optind - 1] or optopt), with the nearest
 * known option and where the options are listed. */
static void bad_option(int c, char **argv, const struct option *opts)
{
    char shown[80];
    const char *typed = argv[optind - 1];
    if (strncmp(typed, "--", 2) == 0)
        snprintf(shown, sizeof shown, "%.*s", (int)strcspn(typed, "="),
                 typed);
    else
        snprintf(shown, sizeof shown, "-%c", optopt);
    if (c == ':') {
        fprintf(stderr, "stepscope run: %s needs a value (`stepscope run "
                "--help` lists the options)\n", shown);
        return;
    }
    for (const struct option *k = opts; k->name; k++)
        if (strncmp(shown, "--", 2) == 0 && strcmp(shown + 2, k->name) == 0) {
            fprintf(stderr, "stepscope run: %s takes no value (`stepscope "
                    "run --help` lists the options)\n", shown);
            return;
        }
    const char *near = ss_cli_suggest_option(shown, opts);
    char hint[96] = "";
    if (near)
        snprintf(hint, sizeof hint, "; did you mean --%s?", near);
    fprintf(stderr, "stepscope run: unknown option '%s'%s (`stepscope run "
            "--help` lists the options)\n", shown, hint);
}

/* Parses ARGV into O and torchrun's flags into TF.  Returns 0, 1 after
 * --help, or 2 on a usage error. */
static int parse_args(ss_run_opts *o, ss_torchrun_flags *tf, int argc,
                      char **argv)
{
    static char n_text[16];
    int join_timeout_given = 0, rdzv_is_host = -1;
    uint32_t rdzv_join_ms = 0;
    static const struct option opts[] = {
        {"nproc-per-node", required_argument, NULL, 'n'},
        {"nproc_per_node", required_argument, NULL, 'n'},
        {"name", required_argument, NULL, 'N'},
        {"db", required_argument, NULL, 'd'},
        {"log-dir", required_argument, NULL, 'l'},
        {"log_dir", required_argument, NULL, 'l'},
        {"grace", required_argument, NULL, 'g'},
        {"connect-timeout", required_argument, NULL, 'c'},
        {"window", required_argument, NULL, 'w'},
        {"set", required_argument, NULL, 's'},
        {"quiet", no_argument, NULL, 'q'},
        {"http", required_argument, NULL, 0x100},
        {"no-http", no_argument, NULL, 0x101},
        {"host-interval", required_argument, NULL, 0x102},
        {"auto", no_argument, NULL, 'A'},
        {"nnodes", required_argument, NULL, 0x110},
        {"node-rank", required_argument, NULL, 0x111},
        {"node_rank", required_argument, NULL, 0x111},
        {"master-addr", required_argument, NULL, 0x112},
        {"master_addr", required_argument, NULL, 0x112},
        {"master-port", required_argument, NULL, 0x113},
        {"master_port", required_argument, NULL, 0x113},
        {"controller-port", required_argument, NULL, 0x114},
        {"job-id", required_argument, NULL, 0x115},
        {"token-file", required_argument, NULL, 0x116},
        {"join-timeout", required_argument, NULL, 0x117},
        {"heartbeat-timeout", required_argument, NULL, 0x118},
        {"aggregate", required_argument, NULL, 0x119},
        {"hang-timeout", required_argument, NULL, 0x103},
        {"on-hang", required_argument, NULL, 0x104},
        {"numerics", required_argument, NULL, 0x105},
        {"on-nonfinite", required_argument, NULL, 0x106},
        {"checksum-every", required_argument, NULL, SS_OPT_CHECKSUM_EVERY},
        {"checksum", required_argument, NULL, SS_OPT_CHECKSUM},
        {"replica-groups", required_argument, NULL, SS_OPT_REPLICA_GROUPS},
        {"on-divergence", required_argument, NULL, SS_OPT_ON_DIVERGENCE},
        {"max-restarts", required_argument, NULL, 0x126},
        {"max_restarts", required_argument, NULL, 0x126},
        {"restart-backoff", required_argument, NULL, 0x127},
        {"max-restarts-per-hour", required_argument, NULL, 0x128},
        /* health checks and fault injection (run_inject.c) */
        {"checkpoint-dir", required_argument, NULL, 0x120},
        {"min-free-gb", required_argument, NULL, 0x121},
        {"health-check", required_argument, NULL, 0x122},
        {"health-check-timeout", required_argument, NULL, 0x123},
        {"no-gpu-check", no_argument, NULL, 0x125},
        {"inject", required_argument, NULL, 0x124},
        /* torchrun's, for a command line that names torchrun */
        {"standalone", no_argument, NULL, 0x12a},
        {"module", no_argument, NULL, 'm'},
        {"no-python", no_argument, NULL, 0x12b},
        {"no_python", no_argument, NULL, 0x12b},
        {"rdzv-backend", required_argument, NULL, 0x12c},
        {"rdzv_backend", required_argument, NULL, 0x12c},
        {"rdzv-endpoint", required_argument, NULL, 0x12d},
        {"rdzv_endpoint", required_argument, NULL, 0x12d},
        {"rdzv-id", required_argument, NULL, 0x12e},
        {"rdzv_id", required_argument, NULL, 0x12e},
        {"rdzv-conf", required_argument, NULL, 0x12f},
        {"rdzv_conf", required_argument, NULL, 0x12f},
        {"local-addr", required_argument, NULL, 0x130},
        {"local_addr", required_argument, NULL, 0x130},
        {"monitor-interval", required_argument, NULL, 0x131},
        {"monitor_interval", required_argument, NULL, 0x131},
        {"start-method", required_argument, NULL, 0x132},
        {"start_method", required_argument, NULL, 0x132},
        {"role", required_argument, NULL, 0x133},
        {"redirects", required_argument, NULL, 'r'},
        {"tee", required_argument, NULL, 't'},
        {"local-ranks-filter", required_argument, NULL, 0x134},
        {"local_ranks_filter", required_argument, NULL, 0x134},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    optind = 1;
    opterr = 0; /* the errors are said below, in one line each */
    int c;
    while ((c = getopt_long(argc, argv, "+:n:qhmr:t:", opts, NULL)) != -1) {
        char err[200];
        switch (c) {
        case 'n':
            o->node_flags.nproc_per_node = optarg;
            if (is_ranks_word(optarg)) {
                if (ranks_of_word("-n", optarg, &o->nproc_local, n_text,
                                  sizeof n_text) != 0)
                    return 2;
                o->node_flags.nproc_per_node = n_text;
                break;
            }
            if (parse_count(optarg, SS_LAUNCH_MAX_RANKS, &o->nproc_local) ||
                o->nproc_local == 0) {
                fprintf(stderr, "stepscope run: -n wants a number of ranks "
                        "from 1 to %d, not '%s'\n", SS_LAUNCH_MAX_RANKS, optarg);
                return 2;
            }
            break;
        case 'N': o->name = optarg; break;
        case 'd': o->db_path = optarg; break;
        case 'l': o->log_dir = optarg; break;
        case 'g':
            if (parse_seconds_ms(optarg, 3600 * 1000, &o->grace_ms)) {
                fprintf(stderr, "stepscope run: bad --grace '%s' (seconds, "
                        "e.g. 10 or 2.5)\n", optarg);
                return 2;
            }
            break;
        case 'c':
            if (parse_seconds_ms(optarg, 86400u * 1000, &o->connect_timeout_ms)) {
                fprintf(stderr, "stepscope run: bad --connect-timeout '%s' "
                        "(seconds, e.g. 60 or 0.5)\n", optarg);
                return 2;
            }
            break;
        case 'w':
            if (parse_count(optarg, 1 << 20, &o->agg_cfg.window_steps) ||
                o->agg_cfg.window_steps < 2) {
                fprintf(stderr, "stepscope run: bad --window '%s' (2 or more "
                        "steps)\n", optarg);
                return 2;
            }
            break;
        case 's': {
            if (strcmp(optarg, "help") == 0) {
                list_params();
                return 1;
            }
            char *eq = strchr(optarg, '=');
            if (!eq) {
                fprintf(stderr, "stepscope run: --set wants NAME=VALUE, not "
                        "'%s'\n", optarg);
                return 2;
            }
            *eq = '\0';
            if (ss_detector_config_set(&o->agg_cfg.detect, optarg, eq + 1, err,
                                       sizeof err) != 0) {
                fprintf(stderr, "stepscope run: --set %s: %s (`stepscope run "
                        "--set help` lists them)\n", optarg, err);
                return 2;
            }
            break;
        }
        case 'q': o->quiet = 1; break;
        case 0x102:
            if (parse_count(optarg, 60000, &o->host_interval_ms)) {
                fprintf(stderr, "stepscope run: bad --host-interval '%s' "
                        "(milliseconds, 0 to 60000; 0 turns host evidence "
                        "off)\n", optarg);
                return 2;
            }
            break;
        case 0x100: {
            char host[64];
            uint16_t port;
            if (ss_http_parse_addr(optarg, host, sizeof host, &port, err,
                                   sizeof err) != 0) {
                fprintf(stderr, "stepscope run: --http %s: %s\n", optarg,
                        err);
                return 2;
            }
            o->http_addr = optarg;
            break;
        }
        case 0x101: o->no_http = 1; break;
        case 0x103: {
            uint32_t ms;
            if (parse_seconds_ms(optarg, 7 * 86400u * 1000, &ms)) {
                fprintf(stderr, "stepscope run: bad --hang-timeout '%s' "
                        "(seconds, e.g. 60 or 2.5; 0 turns hang detection "
                        "off)\n", optarg);
                return 2;
            }
            o->hang_off = ms == 0;
            o->hang_cfg.timeout = (ss_dur_ns)ms * 1000000;
            break;
        }
        case 0x104:
            if (strcmp(optarg, "dump") == 0) {
                o->on_hang = SS_ON_HANG_DUMP;
            } else if (strcmp(optarg, "stop") == 0) {
                o->on_hang = SS_ON_HANG_STOP;
            } else if (strcmp(optarg, "restart") == 0) {
                o->on_hang = SS_ON_HANG_RESTART;
            } else {
                fprintf(stderr, "stepscope run: --on-hang wants dump, stop "
                        "or restart, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 0x105:
            if (strcmp(optarg, "off") != 0 && strcmp(optarg, "light") != 0 &&
                strcmp(optarg, "full") != 0) {
                fprintf(stderr, "stepscope run: --numerics wants off, light "
                        "or full, not '%s'\n", optarg);
                return 2;
            }
            o->numerics = optarg;
            break;
        case 0x106:
            if (strcmp(optarg, "dump") == 0) {
                o->on_nonfinite = SS_ON_NONFINITE_DUMP;
            } else if (strcmp(optarg, "stop") == 0) {
                o->on_nonfinite = SS_ON_NONFINITE_STOP;
            } else if (strcmp(optarg, "restart") == 0) {
                o->on_nonfinite = SS_ON_NONFINITE_RESTART;
            } else {
                fprintf(stderr, "stepscope run: --on-nonfinite wants dump, "
                        "stop or restart, not '%s'\n", optarg);
                return 2;
            }
            break;
        case SS_OPT_CHECKSUM_EVERY:
        case SS_OPT_CHECKSUM:
        case SS_OPT_REPLICA_GROUPS:
        case SS_OPT_ON_DIVERGENCE:
            if (replica_option(o, c, optarg) != 0)
                return 2;
            break;
        case 0x126:
            if (parse_count(optarg, SS_RESTART_MAX,
                            &o->restart_cfg.max_restarts)) {
                fprintf(stderr, "stepscope run: bad --max-restarts '%s' (0 "
                        "to %d)\n", optarg, SS_RESTART_MAX);
                return 2;
            }
            break;
        case 0x127:
            if (parse_seconds_ms(optarg, SS_RESTART_BACKOFF_MAX_MS,
                                 &o->restart_cfg.backoff_ms)) {
                fprintf(stderr, "stepscope run: bad --restart-backoff '%s' "
                        "(seconds, 0 to %d, e.g. 1 or 0.5)\n", optarg,
                        SS_RESTART_BACKOFF_MAX_MS / 1000);
                return 2;
            }
            break;
        case 0x128:
            if (parse_count(optarg, SS_RESTART_PER_HOUR_MAX,
                            &o->restart_cfg.per_hour) ||
                o->restart_cfg.per_hour == 0) {
                fprintf(stderr, "stepscope run: bad --max-restarts-per-hour "
                        "'%s' (1 to %d)\n", optarg, SS_RESTART_PER_HOUR_MAX);
                return 2;
            }
            break;
        case 'A': o->auto_mode = 1; break;
        case 0x110: o->node_flags.nnodes = optarg; break;
        case 0x111: o->node_flags.node_rank = optarg; break;
        case 0x112: o->node_flags.master_addr = optarg; break;
        case 0x113: o->node_flags.master_port = optarg; break;
        case 0x114: o->node_flags.controller_port = optarg; break;
        case 0x115: o->node_flags.job_id = optarg; break;
        case 0x116: o->token_file = optarg; break;
        case 0x117:
            if (parse_seconds_ms(optarg, 86400u * 1000, &o->join_timeout_ms) ||
                o->join_timeout_ms == 0) {
                fprintf(stderr, "stepscope run: bad --join-timeout '%s' "
                        "(seconds, e.g. 300)\n", optarg);
                return 2;
            }
            join_timeout_given = 1;
            break;
        case 0x118:
            if (parse_seconds_ms(optarg, 3600u * 1000,
                                 &o->heartbeat_timeout_ms) ||
                o->heartbeat_timeout_ms < 2000) {
                fprintf(stderr, "stepscope run: bad --heartbeat-timeout '%s' "
                        "(seconds, 2 or more)\n", optarg);
                return 2;
            }
            break;
        case 0x119:
            if (strcmp(optarg, "rank") == 0) {
                o->aggregate = SS_AGGREGATE_RANK;
            } else if (strcmp(optarg, "node") == 0) {
                o->aggregate = SS_AGGREGATE_NODE;
            } else {
                fprintf(stderr, "stepscope run: bad --aggregate '%s' (rank "
                        "or node)\n", optarg);
                return 2;
            }
            break;
        case 0x120: o->health_cfg.checkpoint_dir = optarg; break;
        case 0x121: {
            char *end = NULL;
            double gb = strtod(optarg, &end);
            if (!end || *end || end == optarg || !(gb >= 0 && gb <= 1e9)) {
                fprintf(stderr, "stepscope run: bad --min-free-gb '%s' "
                        "(gigabytes, e.g. 50 or 0.5; 0 turns the check "
                        "off)\n", optarg);
                return 2;
            }
            o->health_cfg.min_free_gb = gb;
            break;
        }
        case 0x122: o->health_cfg.command = optarg; break;
        case 0x125: o->health_cfg.gpus = 0; break;
        case 0x123:
            if (parse_seconds_ms(optarg, 3600u * 1000,
                                 &o->health_cfg.timeout_ms) ||
                o->health_cfg.timeout_ms == 0) {
                fprintf(stderr, "stepscope run: bad --health-check-timeout "
                        "'%s' (seconds, e.g. 60)\n", optarg);
                return 2;
            }
            break;
        case 0x124:
            if (ss_inject_add(&o->inject, optarg, err, sizeof err) != 0) {
                fprintf(stderr, "stepscope run: %s\n", err);
                return 2;
            }
            break;
        case 0x12a: tf->standalone = 1; break;
        case 'm': tf->module = 1; break;
        case 0x12b: tf->no_python = 1; break;
        case 0x12c: o->node_flags.rdzv_backend = optarg; break;
        case 0x12d: o->node_flags.rdzv_endpoint = optarg; break;
        case 0x12e: o->node_flags.rdzv_id = optarg; break;
        case 0x12f:
            if (ss_torchrun_rdzv_conf(optarg, &rdzv_join_ms, &rdzv_is_host,
                                      err, sizeof err) != 0) {
                fprintf(stderr, "stepscope run: %s\n", err);
                return 2;
            }
            break;
        case 0x130: break; /* torchrun's rendezvous address: none here */
        case 0x131: {
            char *end = NULL;
            double s = strtod(optarg, &end);
            if (!end || *end || end == optarg || !(s > 0 && s <= 3600)) {
                fprintf(stderr, "stepscope run: bad --monitor-interval '%s' "
                        "(seconds above 0; stepscope sees a rank's exit at "
                        "once and takes it without effect)\n", optarg);
                return 2;
            }
            break;
        }
        case 0x132:
            if (strcmp(optarg, "spawn") != 0 && strcmp(optarg, "fork") != 0 &&
                strcmp(optarg, "forkserver") != 0) {
                fprintf(stderr, "stepscope run: --start-method wants spawn, "
                        "fork or forkserver, not '%s'\n", optarg);
                return 2;
            }
            break; /* a script's ranks are processes of their own anyway */
        case 0x133:
            if (!*optarg || strchr(optarg, '=') || strchr(optarg, '\n')) {
                fprintf(stderr, "stepscope run: bad --role '%s' (a name for "
                        "ROLE_NAME)\n", optarg);
                return 2;
            }
            o->role = optarg;
            break;
        case 'r':
        case 't':
            if (ss_torchrun_streams_check(c == 'r' ? "--redirects" : "--tee",
                                          optarg, err, sizeof err) != 0) {
                fprintf(stderr, "stepscope run: %s\n", err);
                return 2;
            }
            *(c == 'r' ? &tf->redirects : &tf->tee) = optarg;
            break;
        case 0x134:
            if (ss_torchrun_filter_check(optarg, err, sizeof err) != 0) {
                fprintf(stderr, "stepscope run: %s\n", err);
                return 2;
            }
            tf->ranks_filter = optarg;
            break;
        case 'h': usage(stdout); return 1;
        default: bad_option(c, argv, opts); return 2;
        }
    }
    if (rdzv_join_ms && !join_timeout_given)
        o->join_timeout_ms = rdzv_join_ms;
    if (tf->module && tf->no_python) {
        fprintf(stderr, "stepscope run: -m runs CMD with python -m, "
                "--no-python without Python: give one of them\n");
        return 2;
    }
    if (tf->standalone) {
        /* one node, as torchrun's --standalone: Slurm's or the PET_
         * variables do not make it several */
        const char *nn = o->node_flags.nnodes;
        if (nn && strcmp(nn, "1") != 0 && strcmp(nn, "1:1") != 0) {
            fprintf(stderr, "stepscope run: --standalone is one node; "
                    "--nnodes %s asks for more\n", nn);
            return 2;
        }
        o->node_flags.nnodes = "1";
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc) {
        fprintf(stderr, "stepscope run: no command given (stepscope run -n N "
                "-- CMD ARGS...)\n");
        return 2;
    }
    o->argv = argv + optind;
    if (o->on_hang == SS_ON_HANG_RESTART && o->restart_cfg.max_restarts == 0) {
        fprintf(stderr, "stepscope run: --on-hang restart needs --max-restarts "
                "1 or more (hangs count against it)\n");
        return 2;
    }
    if (o->numerics && !o->auto_mode) {
        fprintf(stderr, "stepscope run: --numerics needs --auto (a script "
                "that records by hand sends what it wants)\n");
        return 2;
    }
    if (o->on_nonfinite != SS_ON_NONFINITE_DUMP && o->numerics &&
        strcmp(o->numerics, "off") == 0) {
        fprintf(stderr, "stepscope run: --on-nonfinite needs --numerics "
                "light or full\n");
        return 2;
    }
    if (o->on_nonfinite == SS_ON_NONFINITE_RESTART &&
        o->restart_cfg.max_restarts == 0) {
        fprintf(stderr, "stepscope run: --on-nonfinite restart needs "
                "--max-restarts 1 or more (the replay counts against it)\n");
        return 2;
    }
    int rc = resolve_nodes(o, rdzv_is_host);
    if (rc == 0)
        o->echo_mask = ss_torchrun_echo_mask(tf, o->nproc_local);
    char err[300];
    if (rc == 0 && ss_inject_check(&o->inject, o->nprocs, o->nnodes, err,
                                   sizeof err) != 0) {
        fprintf(stderr, "stepscope run: %s\n", err);
        return 2;
    }
    return rc;
}

/* Whether P is a regular file this process may execute. */
static int runnable(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

/* NAME found on PATH into OUT, as execvp would find it; 0, or -1. */
static int on_path(const char *name, char *out, size_t outlen)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(out, outlen, "%.*s%s%s", (int)n, n ? p : ".",
                 n && p[n - 1] == '/' ? "" : "/", name);
        if (runnable(out))
            return 0;
        p += n + (p[n] == ':');
    }
    return -1;
}

/*
 * The command the ranks run, checked before anything starts: a script
 * named FILE.py (unless TF says --no-python), or a module with TF's -m,
 * is run by the Python on PATH (python3, else python), as torchrun does,
 * and said once; a command that is not on PATH, or a file that is missing
 * or not executable, is refused here (exit status 127 as a shell's)
 * instead of by every rank after the launch.  *ARGV_OUT is then a new
 * argv (to free) or ARGV itself.  Returns 0 or 127.
 */
static int resolve_command(char **argv, const ss_torchrun_flags *tf,
                           char ***argv_out)
{
    *argv_out = argv;
    const char *cmd = argv[0];
    size_t len = strlen(cmd);
    char found[4096];
    int script = !tf->no_python && len > 3 && strcmp(cmd + len - 3, ".py") == 0;
    if (script || tf->module) {
        struct stat st;
        if (!tf->module && stat(cmd, &st) != 0) {
            fprintf(stderr, "stepscope run: cannot run '%s': %s; no rank was "
                    "started\n", cmd, strerror(errno));
            return 127;
        }
        if (on_path("python3", found, sizeof found) != 0 &&
            on_path("python", found, sizeof found) != 0) {
            fprintf(stderr, "stepscope run: %s is a Python script, but no "
                    "python3 or python is on PATH; give the interpreter "
                    "(stepscope run ... -- /path/to/python %s)\n", cmd, cmd);
            return 127;
        }
        size_t n = 0, k = 0;
        while (argv[n])
            n++;
        char **v = calloc(n + 3, sizeof *v);
        char *py = strdup(found);
        if (!v || !py) {
            free(v);
            free(py);
            fprintf(stderr, "stepscope run: out of memory\n");
            return 127;
        }
        v[k++] = py;
        if (tf->module)
            v[k++] = "-m";
        memcpy(v + k, argv, (n + 1) * sizeof *v);
        fprintf(stderr, "stepscope run: running %s%s with %s (the Python on "
                "PATH), as torchrun does\n", tf->module ? "module " : "",
                cmd, py);
        *argv_out = v;
        return 0;
    }
    if (strchr(cmd, '/')) {
        if (runnable(cmd))
            return 0;
        fprintf(stderr, "stepscope run: cannot run '%s': %s; no rank was "
                "started\n", cmd, access(cmd, F_OK) != 0 ? strerror(errno)
                : "Permission denied (not an executable file)");
        return 127;
    }
    if (on_path(cmd, found, sizeof found) == 0)
        return 0;
    fprintf(stderr, "stepscope run: cannot run '%s': no such command on "
            "PATH; no rank was started\n", cmd);
    return 127;
}

int ss_cmd_run(int argc, char **argv)
{
    ss_run_opts o;
    ss_run_opts_defaults(&o);
    ss_torchrun_flags tf = {0};
    int prc = parse_args(&o, &tf, argc, argv);
    if (prc) {
        free(o.echo_mask);
        return prc == 1 ? 0 : 2;
    }
    char **given = o.argv;
    int crc = resolve_command(given, &tf, &o.argv);
    if (crc) {
        free(o.echo_mask);
        return crc;
    }
    link_secret secret;
    memset(&secret, 0, sizeof secret);
    int st = ss_run_prepare(&o, &secret);
    if (st == 0)
        st = o.conf.node_rank > 0 ? ss_cmd_agent(&o, &secret)
                                  : ss_run_controller(&o, &secret);
    if (o.argv != given) {
        free(o.argv[0]);
        free(o.argv);
    }
    free(o.echo_mask);
    return st;
}
