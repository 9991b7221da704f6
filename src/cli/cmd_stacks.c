/*
 * cmd_stacks.c - the command line of `stepscope stacks` (commands.h): its
 * options, usage and checks; views/stacks_cmd.h asks the live controller.
 *
 *   stepscope stacks [--db PATH | --url URL] [--token TOKEN] [--native]
 *                    [--json] [RUN]
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "live_args.h"
#include "stacks_cmd.h"

static const char usage[] =
    "usage: stepscope stacks [--db PATH | --url URL] [--token TOKEN]\n"
    "                        [--native] [--json] [RUN]\n"
    "\n"
    "Every rank's stacks of a running job, ranks with the same stack\n"
    "grouped, the smallest group (the outlier) first.  The Python stack of\n"
    "every thread, also of a rank blocked in C while holding the GIL; with\n"
    "--native also native frames (ptrace).  RUN: a live run's id or name\n"
    "(default: the newest live run of the store).  --json prints the\n"
    "controller's document (docs/debug.md).  Exit status 3: some rank gave\n"
    "no Python stack.\n";

/* Parses ARGV into O.  Returns -1 to go on, or the exit status (0 after
 * --help, 2 for a usage error). */
static int parse_args(int argc, char **argv, ss_stacks_opts *o, FILE *out,
                      FILE *err)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int took = ss_live_args_take("stacks", argc, argv, &i, &o->live, err);
        if (took == 2)
            return 2;
        if (took)
            continue;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, out);
            return 0;
        } else if (strcmp(a, "--native") == 0) {
            o->native = 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else {
            fprintf(err, "stepscope stacks: unknown option '%s' (see "
                         "`stepscope stacks --help`)\n", a);
            return 2;
        }
    }
    return ss_live_args_check("stacks", &o->live, err);
}

int ss_cmd_stacks(int argc, char **argv)
{
    ss_stacks_opts o;
    int rc = parse_args(argc, argv, &o, stdout, stderr);
    return rc >= 0 ? rc : ss_stacks_cmd(&o, stdout, stderr);
}
