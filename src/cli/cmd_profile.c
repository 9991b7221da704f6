/*
 * cmd_profile.c - the command line of `stepscope profile` (commands.h):
 * its options, usage and checks; views/profile_cmd.h asks the live
 * controller and waits for the traces.
 *
 *   stepscope profile [--db PATH | --url URL] [--token TOKEN] [RUN]
 *                     --ranks LIST --seconds S
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "live_args.h"
#include "profile_cmd.h"

static const char usage[] =
    "usage: stepscope profile [--db PATH | --url URL] [--token TOKEN] [RUN]\n"
    "                         --ranks LIST --seconds S\n"
    "\n"
    "Asks ranks of a running job (started with `stepscope run --auto`) to\n"
    "run torch.profiler for S seconds, waits for their traces and prints\n"
    "where they are.  `stepscope trace` merges them with the steps.\n"
    "\n"
    "  RUN            the run (id or name); default: the newest running one\n"
    "  --ranks LIST   the ranks, e.g. 2,5 or 0-3,7\n"
    "  --seconds S    how long to profile, at most 600\n"
    "  --db PATH      the store whose runs to look for (default store)\n"
    "  --url URL      the controller's API (http://HOST:PORT/) instead\n"
    "  --token TOKEN  the run token, for an API not on loopback\n"
    "  -h, --help     print this help\n";

/* Parses ARGV into O.  Returns -1 to go on, or the exit status (0 after
 * --help, 2 for a usage error). */
static int parse_args(int argc, char **argv, ss_profile_opts *o, FILE *out,
                      FILE *err)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int took = ss_live_args_take("profile", argc, argv, &i, &o->live,
                                     err);
        if (took == 2)
            return 2;
        if (took)
            continue;
        const char **dst = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, out);
            return 0;
        } else if (strcmp(a, "--ranks") == 0) {
            dst = &o->ranks;
        } else if (strcmp(a, "--seconds") == 0) {
            dst = &o->seconds;
        } else {
            fprintf(err, "stepscope profile: unknown option '%s' (see "
                         "`stepscope profile --help`)\n", a);
            return 2;
        }
        if (ss_cli_option_value("profile", argc, argv, &i, dst, err))
            return 2;
    }
    if (!o->ranks || !o->seconds) {
        fprintf(err, "stepscope profile: --ranks and --seconds are needed "
                     "(e.g. --ranks 0,1 --seconds 5)\n");
        return 2;
    }
    if (o->ranks[strspn(o->ranks, "0123456789,-")] != '\0') {
        fprintf(err, "stepscope profile: --ranks wants a list like 2,5 or "
                     "0-3, not '%s'\n", o->ranks);
        return 2;
    }
    char *end;
    double s = strtod(o->seconds, &end);
    if (end == o->seconds || *end || !(s > 0) || s > 600) {
        fprintf(err, "stepscope profile: --seconds wants a number in "
                     "(0, 600], not '%s'\n", o->seconds);
        return 2;
    }
    return ss_live_args_check("profile", &o->live, err);
}

int ss_cmd_profile(int argc, char **argv)
{
    ss_profile_opts o;
    int rc = parse_args(argc, argv, &o, stdout, stderr);
    return rc >= 0 ? rc : ss_profile_cmd(&o, stdout, stderr);
}
