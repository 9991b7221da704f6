/*
 * live_args.c - the command-line arguments shared by the commands that
 * talk to a live run (live_args.h).
 */
#include "live_args.h"

#include <string.h>

#include "cli_args.h"
#include "pg_conn.h"
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
    if (ss_pg_is_uri(a->db)) {
        /* A live run is found through its node's live-run file; the team
         * database holds runs, not addresses. */
        fprintf(err, "stepscope %s: a team database (%s) does not say "
                "where a live run listens: on the job's node `stepscope %s` "
                "without --db finds it (a job run with --db postgresql://... "
                "records into the default store first), elsewhere give the "
                "job's --url (its dashboard, printed when it started)\n",
                cmd, a->db, cmd);
        return 2;
    }
    if (a->url && a->db) {
        fprintf(err, "stepscope %s: give --db or --url, not both\n", cmd);
        return 2;
    }
    return -1;
}
