/*
 * cmd_guard.c - the command line of `stepscope guard` (commands.h): its
 * options, usage and the --set settings; views/guard.h judges the run.
 *
 *   stepscope guard [--db PATH] [--name NAME] [RUN] [--baseline RUNS |
 *                   --last N] [--metric M ...] [--json] [--junit FILE]
 *                   [--markdown FILE] [--set NAME=VALUE ...]
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_suggest.h"
#include "commands.h"
#include "guard.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: stepscope guard [--db PATH] [--name NAME] [RUN]\n"
            "                       [--baseline RUNS | --last N] [--metric M ...]\n"
            "                       [--json] [--junit FILE] [--markdown FILE]\n"
            "                       [--set NAME=VALUE ...]\n"
            "\n"
            "Compares a run (default: the latest, or the latest named NAME) with\n"
            "the comparable runs before it: same name, same fingerprint (command,\n"
            "world size, CPU, GPU, driver, Python, torch, stepscope, speed knobs),\n"
            "finished successfully.  A metric regresses when its per-step samples\n"
            "differ significantly (rank-sum test) AND the shift exceeds its\n"
            "threshold and the spread between the baseline runs.\n"
            "\n"
            "  --db PATH          the store (default: the user's store)\n"
            "  --name NAME        judge the latest run of NAME\n"
            "  --baseline RUNS    compare with these runs (ids: 3,5,7-9); runs\n"
            "                     that differ are compared and the difference said\n"
            "  --last N           the last N comparable runs (default 10)\n"
            "  --metric M         only metric M (a name, or a prefix ending in '.'\n"
            "                     such as phase.); repeatable\n"
            "  --json             the verdict as JSON on stdout\n"
            "  --junit FILE       a JUnit XML report (one test case per metric)\n"
            "  --markdown FILE    a Markdown report with the history as a sparkline\n"
            "  --set NAME=VALUE   alpha, run_alpha, confidence, warmup, min_runs,\n"
            "                     history, block, consecutive, or a threshold in\n"
            "                     percent: threshold=P"
            " for all, threshold.METRIC=P,\n"
            "                     threshold.phase.=P; determinism=1: fail a run\n"
            "                     whose losses or checksums differ from its\n"
            "                     newest baseline run's (stepscope diff)\n"
            "\n"
            "Exit status: 0 no regression, 1 regression, 2 cannot judge.\n");
}

/* Applies one --set NAME=VALUE; -1 with a message in ERR when bad. */
static int apply_set(guard_settings *s, const char *arg, char *err,
                     size_t errlen)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        snprintf(err, errlen, "--set: expected NAME=VALUE, got '%s'", arg);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(eq + 1, &end);
    if (end == eq + 1 || errno || (*end && strcmp(end, "%") != 0) ||
        !isfinite(v) || v < 0) {
        snprintf(err, errlen, "--set %.*s: expected a number >= 0, got '%s'",
                 (int)(eq - arg), arg, eq + 1);
        return -1;
    }
    size_t klen = (size_t)(eq - arg);
#define KEY(k) (klen == strlen(k) && strncmp(arg, k, klen) == 0)
    if (KEY("alpha") && v > 0 && v < 1) {
        s->alpha = v;
    } else if (KEY("run_alpha") && v > 0 && v < 0.5) {
        s->run_alpha = v;
    } else if (KEY("confidence") && v > 0 && v < 1) {
        s->confidence = v;
    } else if (KEY("warmup")) {
        s->warmup = (size_t)v;
    } else if (KEY("min_runs") && v >= 1) {
        s->min_runs = (size_t)v;
    } else if (KEY("history") && v >= 3) {
        s->history = (size_t)v;
    } else if (KEY("block") && v >= 2) {
        s->block = (size_t)v;
    } else if (KEY("consecutive") && v >= 1) {
        s->consecutive = (size_t)v;
    } else if (KEY("determinism") && (v == 0 || v == 1)) {
        s->determinism = (int)v;
    } else if (strncmp(arg, "threshold", 9) == 0 &&
               (arg[9] == '=' || arg[9] == '.')) {
        /* Kept as "METRIC=PERCENT" ("=PERCENT" for every metric). */
        const char *metric = arg[9] == '.' ? arg + 10 : eq;
        char **t = realloc(s->thresholds,
                           (s->n_thresholds + 1) * sizeof *t);
        size_t mlen = (size_t)(eq - metric);
        char *entry = t ? malloc(mlen + 64) : NULL;
        if (t)
            s->thresholds = t;
        if (!entry) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        snprintf(entry, mlen + 64, "%.*s=%g", (int)mlen, metric, v);
        s->thresholds[s->n_thresholds++] = entry;
    } else {
        snprintf(err, errlen,
                 "--set: unknown setting or value out of range '%s' (alpha "
                 "and confidence in (0, 1), run_alpha in (0, 0.5), min_runs >= 1, history >= 3, "
                 "block >= 2, consecutive >= 1, determinism 0 or 1, warmup, "
                 "threshold[.METRIC])", arg);
        return -1;
    }
#undef KEY
    return 0;
}

/* Parses ARGV into O and ST.  Returns 0 to go on, 1 after --help, -1
 * after a usage error printed to ERR. */
static int parse_options(int argc, char **argv, ss_guard_opts *o,
                         guard_settings *st, FILE *out, FILE *err)
{
    static const struct option longopts[] = {
        {"db", required_argument, NULL, 'd'},
        {"name", required_argument, NULL, 'n'},
        {"baseline", required_argument, NULL, 'b'},
        {"last", required_argument, NULL, 'l'},
        {"metric", required_argument, NULL, 'm'},
        {"json", no_argument, NULL, 'j'},
        {"junit", required_argument, NULL, 'u'},
        {"markdown", required_argument, NULL, 'k'},
        {"set", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char msg[512];
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd': o->db = optarg; break;
        case 'n': o->name = optarg; break;
        case 'b': o->baseline = optarg; break;
        case 'j': o->json = 1; break;
        case 'u': o->junit = optarg; break;
        case 'k': o->markdown = optarg; break;
        case 'l': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 1 || v > 10000) {
                fprintf(err, "stepscope guard: --last: expected 1..10000, got "
                        "'%s'\n", optarg);
                return -1;
            }
            st->last = (size_t)v;
            break;
        }
        case 'm': {
            char **t = realloc(o->metrics, (o->n_metrics + 1) * sizeof *t);
            if (!t) {
                fprintf(err, "stepscope guard: out of memory\n");
                return -1;
            }
            o->metrics = t;
            o->metrics[o->n_metrics++] = optarg;
            break;
        }
        case 's':
            if (apply_set(st, optarg, msg, sizeof msg) != 0) {
                fprintf(err, "stepscope guard: %s\n", msg);
                return -1;
            }
            break;
        case 'h':
            usage(out);
            return 1;
        case ':':
            fprintf(err, "stepscope guard: option '%s' needs a value (see "
                         "`stepscope guard --help`)\n", argv[optind - 1]);
            return -1;
        default:
            ss_cli_unknown_option(err, "guard", argv[optind - 1], longopts);
            return -1;
        }
    }
    if (optind < argc)
        o->run = argv[optind++];
    if (optind < argc) {
        fprintf(err, "stepscope guard: unexpected argument '%s'\n",
                argv[optind]);
        return -1;
    }
    if (o->run && o->name) {
        fprintf(err, "stepscope guard: give RUN or --name, not both\n");
        return -1;
    }
    return 0;
}

int ss_cmd_guard(int argc, char **argv)
{
    ss_guard_opts o = {0};
    guard_settings st;
    guard_settings_defaults(&st);
    int status = parse_options(argc, argv, &o, &st, stdout, stderr);
    if (status == 0) {
        o.settings = &st;
        status = ss_guard_cmd(&o, stdout, stderr);
    } else {
        status = status > 0 ? 0 : SS_GUARD_CANNOT_JUDGE;
    }
    free(o.metrics);
    guard_settings_free(&st);
    return status;
}
