/*
 * cmd_runs.c - the command line of `stepscope runs` (commands.h): its
 * options, usage and checks; views/report.h lists the runs.
 *
 *   stepscope runs [--db PATH] [--json]
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "report.h"

static const char usage[] =
    "usage: stepscope runs [--db PATH] [--json]\n"
    "\n"
    "Lists the runs in the store, oldest first.\n"
    "\n"
    "  --db PATH    the store; default: $XDG_DATA_HOME/stepscope/stepscope.db\n"
    "               or ~/.local/share/stepscope/stepscope.db\n"
    "  --json       print {\"db\": PATH, \"runs\": [...]}\n"
    "  -h, --help   print this help\n";

/* Parses ARGV into O.  Returns -1 to go on, or the exit status to return
 * (0 after --help, 2 for a usage error, reported on stderr). */
static int parse_args(int argc, char **argv, ss_runs_opts *o)
{
    *o = (ss_runs_opts){0};
    int only_args = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_args && strcmp(a, "--") == 0) {
            only_args = 1;
        } else if (!only_args && (strcmp(a, "-h") == 0 ||
                                  strcmp(a, "--help") == 0)) {
            fputs(usage, stdout);
            return 0;
        } else if (!only_args && strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (!only_args && (strcmp(a, "--db") == 0 ||
                                  strncmp(a, "--db=", 5) == 0)) {
            const char *val = a[4] == '=' ? a + 5
                                          : (i + 1 < argc ? argv[++i] : NULL);
            if (!val || !*val) {
                fprintf(stderr, "stepscope runs: --db needs a path\n");
                return 2;
            }
            o->db = val;
        } else if (!only_args && a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "stepscope runs: unknown option '%s' (see "
                            "`stepscope runs --help`)\n", a);
            return 2;
        } else {
            fprintf(stderr, "stepscope runs: unexpected argument '%s' (see "
                            "`stepscope runs --help`)\n", a);
            return 2;
        }
    }
    return -1;
}

int ss_cmd_runs(int argc, char **argv)
{
    ss_runs_opts o;
    int rc = parse_args(argc, argv, &o);
    return rc >= 0 ? rc : ss_runs_cmd(&o, stdout, stderr);
}
