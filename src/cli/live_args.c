/*
 * live_args.c - the command-line arguments shared by the commands that
 * talk to a live run (live_args.h).
 */
#include "live_args.h"

#include <string.h>

#include "cli_args.h"
int ss_live_args_take(const char *cmd, int argc, char **argv, int *i,
                      ss_live_args *a, FILE *err)
{
    const char *arg = argv[*i];
    const char **dst = strcmp(arg, "--db") == 0      ? &a->db
                       : strcmp(arg, "--url") == 0   ? &a->url
                       : strcmp(arg, "--token") == 0 ? &a->token
                                                     : NULL;
    if (!dst) {
        if (arg[0] == '-' && arg[1])
            return 0;
        if (a->run) {
            fprintf(err, "stepscope %s: unexpected argument '%s'\n", cmd,
                    arg);
            return 2;
        }
        a->run = arg;
        return 1;
    }
    return ss_cli_option_value(cmd, argc, argv, i, dst, err) ? 2 : 1;
}

int ss_live_args_check(const char *cmd, const ss_live_args *a, FILE *err)
{
    if (a->url && strncmp(a->url, "http://", 7) != 0) {
        fprintf(err, "stepscope %s: --url wants http://HOST:PORT/, not "
                     "'%s'\n", cmd, a->url);
        return 2;
    }
    if (a->url && a->db) {
        fprintf(err, "stepscope %s: give --db or --url, not both\n", cmd);
        return 2;
    }
    return -1;
}
