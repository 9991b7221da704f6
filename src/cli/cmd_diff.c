/*
 * cmd_diff.c - the command line of `stepscope diff` (commands.h): its
 * options, usage and checks; views/diff.h compares the runs.
 *
 *   stepscope diff [--db PATH] [--db-b PATH] [--json] RUN_A RUN_B
 */
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "diff.h"

static const char usage[] =
    "usage: stepscope diff [--db PATH] [--db-b PATH] [--json] RUN_A RUN_B\n"
    "\n"
    "Compares two runs step by step and rank by rank: the loss, the\n"
    "numerics scalars and the parameter checksums (`stepscope run\n"
    "--checksum-every`).  RUN_B is read from --db-b when given.  Exit\n"
    "status 0: identical; 1: diverged (the first step, rank and parameter,\n"
    "and how far the losses differ after it); 2: cannot compare (why is\n"
    "said), or an error.  docs/consistency.md.\n";

int ss_cmd_diff(int argc, char **argv)
{
    ss_diff_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            o.json = 1;
        } else if (strcmp(a, "--db") == 0 || strcmp(a, "--db-b") == 0) {
            if (ss_cli_option_value("diff", argc, argv, &i,
                                    a[4] == '-' ? &o.db_b : &o.db, stderr))
                return 2;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "stepscope diff: unknown option '%s' (see "
                            "`stepscope diff --help`)\n", a);
            return 2;
        } else if (!o.run_a) {
            o.run_a = a;
        } else if (!o.run_b) {
            o.run_b = a;
        } else {
            fprintf(stderr, "stepscope diff: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!o.run_a || !o.run_b) {
        fprintf(stderr, "stepscope diff: give two runs, RUN_A and RUN_B\n%s",
                usage);
        return 2;
    }
    return ss_diff_cmd(&o, stdout, stderr);
}
