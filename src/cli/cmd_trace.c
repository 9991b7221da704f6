/*
 * cmd_trace.c - the command line of `stepscope trace` (commands.h): its
 * options, usage and checks; views/trace.h writes the trace.
 *
 *   stepscope trace [--db PATH] [--attempt N] [RUN] -o FILE
 *                   [--steps A:B] [--ranks LIST]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "trace.h"

static const char usage[] =
    "usage: stepscope trace [--db PATH] [--attempt N] [RUN] -o FILE\n"
    "                       [--steps A:B] [--ranks LIST]\n"
    "\n"
    "Writes a run's per-rank timelines as a Chrome / Perfetto trace (JSON):\n"
    "one track per rank, each step a slice with its phases nested inside,\n"
    "sync arrivals and findings as instant events.  Open it in\n"
    "https://ui.perfetto.dev or chrome://tracing.\n"
    "\n"
    "  RUN            a run id, a run name (its latest run) or a uuid prefix;\n"
    "                 default: the latest run\n"
    "  -o, --output FILE  where to write the trace (- for stdout)\n"
    "  --steps A:B    steps A to B (A:, :B and A work too); default: the\n"
    "                 latest 200 steps kept in the store\n"
    "  --ranks LIST   ranks to draw, e.g. 0,3,8-15; default: all\n"
    "  --db PATH      the store; default: $XDG_DATA_HOME/stepscope/\n"
    "                 stepscope.db or ~/.local/share/stepscope/stepscope.db\n"
    "  --attempt N    attempt N of a restarted run; default: the latest\n"
    "  -h, --help     print this help\n";

/* Parses ARGV into O.  Returns -1 to go on, or the exit status. */
static int parse_args(int argc, char **argv, ss_trace_opts *o, FILE *out,
                      FILE *err)
{
    *o = (ss_trace_opts){.attempt = -1};
    int only_args = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        static const char *const with_value[] = {"--db", "-o", "--output",
                                                 "--steps", "--ranks",
                                                 "--attempt"};
        const char *name = NULL, *val = NULL;
        for (size_t k = 0; !only_args && k < 6; k++) {
            size_t len = strlen(with_value[k]);
            if (strcmp(a, with_value[k]) == 0) {
                name = with_value[k];
                val = i + 1 < argc ? argv[++i] : NULL;
            } else if (strncmp(a, with_value[k], len) == 0 && a[len] == '=' &&
                       with_value[k][1] == '-') {
                name = with_value[k];
                val = a + len + 1;
            }
        }
        if (name) {
            if (!val || !*val) {
                fprintf(err, "stepscope trace: %s needs a value\n", name);
                return 2;
            }
            if (strcmp(name, "--db") == 0)
                o->db = val;
            else if (strcmp(name, "--steps") == 0)
                o->steps = val;
            else if (strcmp(name, "--ranks") == 0)
                o->ranks = val;
            else if (strcmp(name, "--attempt") == 0) {
                char *end;
                errno = 0;
                long long v = strtoll(val, &end, 10);
                if (errno || *end || v < 0 || v > 1000000000) {
                    fprintf(err, "stepscope trace: --attempt needs a number "
                                 "(0 is the first attempt)\n");
                    return 2;
                }
                o->attempt = v;
            } else
                o->output = val;
        } else if (!only_args && strcmp(a, "--") == 0) {
            only_args = 1;
        } else if (!only_args && (strcmp(a, "-h") == 0 ||
                                  strcmp(a, "--help") == 0)) {
            fputs(usage, out);
            return 0;
        } else if (!only_args && a[0] == '-' && a[1] != '\0') {
            fprintf(err, "stepscope trace: unknown option '%s' (see "
                         "`stepscope trace --help`)\n", a);
            return 2;
        } else if (!o->run) {
            o->run = a;
        } else {
            fprintf(err, "stepscope trace: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!o->output) {
        fprintf(err, "stepscope trace: say where to write the trace with -o "
                     "FILE (- for stdout)\n");
        return 2;
    }
    return -1;
}

int ss_cmd_trace(int argc, char **argv)
{
    ss_trace_opts o;
    int rc = parse_args(argc, argv, &o, stdout, stderr);
    return rc >= 0 ? rc : ss_trace_cmd(&o, stdout, stderr);
}
