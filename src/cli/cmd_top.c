/*
 * cmd_top.c - the command line of `stepscope top` (commands.h): its
 * options, usage and checks; views/top.h draws the live view.
 *
 *   stepscope top [--db PATH] [--url URL] [--token TOKEN] [--interval S]
 *                 [--once] [RUN]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "live_args.h"
#include "top.h"

static const char usage[] =
    "usage: stepscope top [--db PATH] [--url URL] [--token TOKEN]\n"
    "                     [--interval SECONDS] [--once] [RUN]\n"
    "\n"
    "A live view of a running job: step rate, worst vs median step time,\n"
    "one line per rank (step time against the median rank, current phase,\n"
    "last step, last heard) and the newest findings.  q or Ctrl-C quits.\n"
    "\n"
    "  RUN            the run to watch (id or name); default: the newest\n"
    "                 running one of the store\n"
    "  --db PATH      the store whose runs to look for; default: $XDG_DATA_\n"
    "                 HOME/stepscope/stepscope.db or ~/.local/share/...\n"
    "  --url URL      the controller's API (http://HOST:PORT/) instead\n"
    "  --token TOKEN  the run token, for an API not on loopback\n"
    "  --interval S   seconds between refreshes (default 1)\n"
    "  --once         print one snapshot and exit (also when the output is\n"
    "                 not a terminal)\n"
    "  -h, --help     print this help\n";

/* Parses ARGV into O.  Returns -1 to go on, or the exit status (0 after
 * --help, 2 for a usage error). */
static int parse_args(int argc, char **argv, ss_top_opts *o, FILE *out,
                      FILE *err)
{
    *o = (ss_top_opts){.interval_s = 1.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int took = ss_live_args_take("top", argc, argv, &i, &o->live, err);
        if (took == 2)
            return 2;
        if (took)
            continue;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, out);
            return 0;
        } else if (strcmp(a, "--once") == 0) {
            o->once = 1;
        } else if (strcmp(a, "--interval") == 0) {
            const char *val = i + 1 < argc ? argv[++i] : "";
            char *end;
            o->interval_s = strtod(val, &end);
            if (end == val || *end || !(o->interval_s >= 0.1) ||
                o->interval_s > 3600) {
                fprintf(err, "stepscope top: --interval wants seconds from "
                             "0.1 to 3600, not '%s'\n", val);
                return 2;
            }
        } else {
            fprintf(err, "stepscope top: unknown option '%s' (see `stepscope "
                         "top --help`)\n", a);
            return 2;
        }
    }
    return ss_live_args_check("top", &o->live, err);
}

int ss_cmd_top(int argc, char **argv)
{
    ss_top_opts o;
    int rc = parse_args(argc, argv, &o, stdout, stderr);
    return rc >= 0 ? rc : ss_top_cmd(&o, stdout, stderr);
}
