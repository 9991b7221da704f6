/*
 * main.c - the `stepscope` command: dispatches to its subcommands.
 *
 *   stepscope run -n N [options] -- CMD ARGS...   launch and observe a job
 *   stepscope report [--json] [RUN]                explain a stored run
 *   stepscope runs                                 list stored runs
 *   stepscope serve [--db PATH] [--http ADDR:PORT] the dashboard and API
 *   stepscope trace [RUN] -o FILE                  Perfetto / Chrome trace
 *   stepscope goodput [RUN | --name NAME]          goodput, MTBF and MTTR
 *   stepscope diff RUN_A RUN_B                     do two runs compute the same bits?
 *   stepscope top [RUN]                            live terminal view
 *   stepscope profile [RUN] --ranks L --seconds S  torch.profiler on ranks
 *   stepscope guard [RUN] [--baseline RUNS]        regression verdict for CI
 *   stepscope upgrade [--db PATH]                  migrate an older store
 *   stepscope push [--db PATH] --to URI [RUN...]   copy runs to a team database
 *   stepscope gpus [--watch SECONDS]               what NVML says of the GPUs
 *
 * Each command's front-end is src/cli/cmd_NAME.c (commands.h): it parses
 * its own options and hands them to its stage's library.  This file only
 * routes and prints the top-level help.
 */
#include <stdio.h>
#include <string.h>

#include "cli_suggest.h"
#include "commands.h"
#include "containment.h"
#include "http.h"
#include "launcher.h"
#include "native_stack.h"
#include "run.h"
#include "stepscope.h"
#include "web_assets.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: stepscope <command> [options]\n"
            "\n"
            "Step-aligned, rank-aware telemetry for distributed training.\n"
            "\n"
            "commands:\n"
            "  run -n N [options] -- CMD ARGS...  launch N ranks (like torchrun)\n"
            "                                     and record every step\n"
            "  report [--json] [--db PATH] [RUN]  findings, step, phase and rank\n"
            "                                     tables of a run (latest by default)\n"
            "  report --html [-o FILE] [RUN]      the run's charts as one HTML file\n"
            "  runs [--json] [--db PATH]          list the runs in the store\n"
            "  serve [--db PATH] [--http ADDR:PORT]\n"
            "                                     the dashboard and JSON API over\n"
            "                                     the stored runs\n"
            "  trace [RUN] -o FILE [--steps A:B]  per-rank timelines as a Perfetto /\n"
            "                                     Chrome trace (JSON)\n"
            "  goodput [--json] [RUN | --name NAME]\n"
            "                                     where the wall time went (productive,\n"
            "                                     badput); MTBF and MTTR of a name\n"
            "  diff [--db-b PATH] [--json] RUN_A RUN_B\n"
            "                                     two runs step by step and rank by\n"
            "                                     rank: loss, numerics, checksums\n"
            "  top [--db PATH] [--url URL] [RUN]  live view of a running job in\n"
            "                                     the terminal\n"
            "  stacks [--db PATH] [--url URL] [RUN] [--native] [--json]\n"
            "                                     every rank's stacks of a running\n"
            "                                     job, grouped, the outlier first\n"
            "  profile [RUN] --ranks LIST --seconds S\n"
            "                                     torch.profiler traces of chosen\n"
            "                                     ranks of a running --auto job\n"
            "  guard [--db PATH] [--name NAME] [RUN]\n"
            "                                     did the run regress against the\n"
            "                                     comparable runs before it (exit 1)\n"
            "  upgrade [--db PATH]                bring an older store up to this\n"
            "                                     version (readers never write)\n"
            "  push [--db PATH] --to postgresql://... [RUN...]\n"
            "                                     copy finished runs into a team\n"
            "                                     database (PostgreSQL)\n"
            "  gpus [--watch SECONDS]             this machine's GPUs as NVML reads\n"
            "                                     them (clocks, throttling, errors)\n"
            "  version                            print the version\n"
            "\n"
            "`stepscope <command> --help` describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    /* The dashboard, compiled in, for every HTTP server started later. */
    ss_http_set_static(ss_web_files, ss_web_files_count);
    if (strcmp(cmd, "run") == 0)
        return ss_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0)
        return ss_cmd_report(argc - 1, argv + 1);
    if (strcmp(cmd, "runs") == 0)
        return ss_cmd_runs(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0)
        return ss_cmd_serve(argc - 1, argv + 1);
    if (strcmp(cmd, "stacks") == 0)
        return ss_cmd_stacks(argc - 1, argv + 1);
    if (strcmp(cmd, "top") == 0)
        return ss_cmd_top(argc - 1, argv + 1);
    if (strcmp(cmd, "profile") == 0)
        return ss_cmd_profile(argc - 1, argv + 1);
    if (strcmp(cmd, "guard") == 0)
        return ss_cmd_guard(argc - 1, argv + 1);
    if (strcmp(cmd, "trace") == 0)
        return ss_cmd_trace(argc - 1, argv + 1);
    if (strcmp(cmd, "goodput") == 0)
        return ss_cmd_goodput(argc - 1, argv + 1);
    if (strcmp(cmd, "diff") == 0)
        return ss_cmd_diff(argc - 1, argv + 1);
    if (strcmp(cmd, "upgrade") == 0)
        return ss_cmd_upgrade(argc - 1, argv + 1);
    if (strcmp(cmd, "push") == 0)
        return ss_cmd_push(argc - 1, argv + 1);
    if (strcmp(cmd, "gpus") == 0)
        return ss_cmd_gpus(argc - 1, argv + 1);
    if (strcmp(cmd, SS_NATIVE_STACK_ARG) == 0)
        return ss_cmd_native_stack(argc - 1, argv + 1);
    if (strcmp(cmd, SS_RANK_EXEC_ARG) == 0)
        return ss_cmd_rank_exec(argc, argv);
    if (strcmp(cmd, SS_WATCHDOG_ARG) == 0)
        return ss_cmd_job_watchdog(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("stepscope %s (wire protocol %d)\n", SS_VERSION_STRING, 1);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 ||
        strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    static const char *const commands[] = {
        "run",  "report", "runs",    "serve", "stacks", "top",     "profile",
        "guard", "trace", "goodput", "diff",  "upgrade", "gpus", "version",
        "push"};
    const char *near = ss_cli_suggest(cmd, commands,
                                      sizeof commands / sizeof commands[0]);
    char hint[64] = "";
    if (near)
        snprintf(hint, sizeof hint, "; did you mean %s?", near);
    fprintf(stderr, "stepscope: unknown command '%s'%s (`stepscope --help` "
            "lists the commands)\n", cmd, hint);
    return 2;
}
