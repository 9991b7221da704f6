/*
 * cmd_report.c - the command line of `stepscope report` (commands.h): its
 * options, usage and checks; views/report.h makes the report.
 *
 *   stepscope report [--db PATH] [--json] [--attempt N] [--rank R] [RUN]
 *   stepscope report --html [-o FILE] [--db PATH] [--attempt N] [RUN]
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "numparse.h"
#include "report.h"

static const char usage[] =
    "usage: stepscope report [--db PATH] [--json] [--attempt N] [--rank R] "
    "[RUN]\n"
    "       stepscope report --html [-o FILE] [--db PATH] [--attempt N] [RUN]\n"
    "\n"
    "Explains a recorded run: findings first, then step time (median rank\n"
    "vs worst rank), phases, ranks, dropped data and events.\n"
    "\n"
    "  RUN          a run id, a run name (its latest run) or a uuid prefix;\n"
    "               default: the latest run\n"
    "  --db PATH    the store; default: $XDG_DATA_HOME/stepscope/stepscope.db\n"
    "               or ~/.local/share/stepscope/stepscope.db\n"
    "  --json       print one JSON object (docs/report-json.md)\n"
    "  --html       write the dashboard's charts of the run as one HTML file\n"
    "               that needs no network (docs/dashboard.md)\n"
    "  -o FILE      where --html writes; default: stepscope-run-ID.html,\n"
    "               '-' for stdout\n"
    "  --attempt N  report attempt N of a restarted run; default: the latest\n"
    "  --rank R     one rank beside the median rank: its steps, phases, sync\n"
    "               arrivals, host evidence, findings, events and latest\n"
    "               kept steps (with --json: docs/report-json.md)\n"
    "  -h, --help   print this help\n";

/* Parses ARGV into O.  Returns -1 to go on, or the exit status to return
 * (0 after --help, 2 for a usage error, reported on stderr). */
static int parse_args(int argc, char **argv, ss_report_opts *o)
{
    *o = (ss_report_opts){.attempt = -1, .rank = -1};
    int only_args = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (!only_args && strcmp(a, "--") == 0) {
            only_args = 1;
        } else if (!only_args && (strcmp(a, "-h") == 0 ||
                                  strcmp(a, "--help") == 0)) {
            fputs(usage, stdout);
            return 0;
        } else if (!only_args && strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (!only_args && strcmp(a, "--html") == 0) {
            o->html = 1;
        } else if (!only_args &&
                   (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
                    strncmp(a, "--output=", 9) == 0)) {
            if (a[1] == '-' && a[8] == '=')
                val = a + 9;
            else
                val = i + 1 < argc ? argv[++i] : NULL;
            if (!val || !*val) {
                fprintf(stderr, "stepscope report: %s needs a file name ('-' "
                                "for stdout)\n", a);
                return 2;
            }
            o->output = val;
        } else if (!only_args && (strcmp(a, "--db") == 0 ||
                                  strncmp(a, "--db=", 5) == 0)) {
            val = a[4] == '=' ? a + 5 : (i + 1 < argc ? argv[++i] : NULL);
            if (!val || !*val) {
                fprintf(stderr, "stepscope report: --db needs a path\n");
                return 2;
            }
            o->db = val;
        } else if (!only_args && (strcmp(a, "--attempt") == 0 ||
                                  strncmp(a, "--attempt=", 10) == 0)) {
            val = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
            int64_t attempt;
            if (!val || ss_parse_i64(val, 0, 999999999, &attempt) != 0) {
                fprintf(stderr, "stepscope report: --attempt needs a number "
                                "(0 is the first attempt)\n");
                return 2;
            }
            o->attempt = attempt;
        } else if (!only_args && (strcmp(a, "--rank") == 0 ||
                                  strncmp(a, "--rank=", 7) == 0)) {
            val = a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
            int64_t rank;
            if (!val || ss_parse_i64(val, 0, INT32_MAX, &rank) != 0) {
                fprintf(stderr, "stepscope report: --rank needs a rank "
                                "number (0 is the first rank)\n");
                return 2;
            }
            o->rank = rank;
        } else if (!only_args && a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "stepscope report: unknown option '%s' (see "
                            "`stepscope report --help`)\n", a);
            return 2;
        } else if (!o->run) {
            o->run = a;
        } else {
            fprintf(stderr, "stepscope report: unexpected argument '%s' (see "
                            "`stepscope report --help`)\n", a);
            return 2;
        }
    }
    if (o->html && o->json) {
        fprintf(stderr, "stepscope report: --html and --json exclude each "
                        "other\n");
        return 2;
    }
    if (o->html && o->rank >= 0) {
        fprintf(stderr, "stepscope report: --rank is for the text and JSON "
                        "reports, not --html\n");
        return 2;
    }
    if (o->output && !o->html) {
        fprintf(stderr, "stepscope report: -o is for --html (the text and "
                        "JSON reports go to stdout)\n");
        return 2;
    }
    return -1;
}

int ss_cmd_report(int argc, char **argv)
{
    ss_report_opts o;
    int rc = parse_args(argc, argv, &o);
    return rc >= 0 ? rc : ss_report_cmd(&o, stdout, stderr);
}
