/*
 * cmd_push.c - `stepscope push` (commands.h): finished runs of a local
 * store copied into a team database (store/pg_push.h).
 *
 *   stepscope push [--db PATH] --to postgresql://USER@HOST/DB [RUN...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "pg_conn.h"
#include "pg_push.h"

static const char usage[] =
    "usage: stepscope push [--db PATH] --to postgresql://USER@HOST/DB "
    "[RUN...]\n"
    "\n"
    "Copies finished runs of a local store into a team database\n"
    "(PostgreSQL), each in one transaction; every run when none is named.\n"
    "A run the team database already holds is left alone, so pushing\n"
    "twice changes nothing.  The password comes from ~/.pgpass (or\n"
    "PGPASSFILE, PGPASSWORD), never from the URI (docs/store.md).\n"
    "\n"
    "  --db PATH    the local store; default: $XDG_DATA_HOME/stepscope/\n"
    "               stepscope.db or ~/.local/share/stepscope/stepscope.db\n"
    "  --to URI     the team database (`stepscope upgrade --db URI` creates\n"
    "               its schema)\n"
    "  RUN          a run id, name or uuid prefix of the local store\n"
    "  -h, --help   print this help\n";

int ss_cmd_push(int argc, char **argv)
{
    const char *db = NULL, *to = NULL;
    const char **specs = calloc((size_t)argc, sizeof *specs);
    size_t n = 0;
    if (!specs)
        return 1;
    int only_args = 0, status = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_args && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
            fputs(usage, stdout);
            status = 0;
            goto out;
        }
        if (!only_args && strcmp(a, "--") == 0) {
            only_args = 1;
            continue;
        }
        const char **dst = NULL;
        if (!only_args && (strcmp(a, "--db") == 0 ||
                           strncmp(a, "--db=", 5) == 0))
            dst = &db;
        else if (!only_args && (strcmp(a, "--to") == 0 ||
                                strncmp(a, "--to=", 5) == 0))
            dst = &to;
        if (dst) {
            *dst = a[4] == '=' ? a + 5 : (i + 1 < argc ? argv[++i] : NULL);
            if (!*dst || !**dst) {
                fprintf(stderr, "stepscope push: %.4s needs a value\n", a);
                goto out;
            }
            continue;
        }
        if (!only_args && a[0] == '-' && a[1]) {
            fprintf(stderr, "stepscope push: unknown option '%s' (see "
                    "`stepscope push --help`)\n", a);
            goto out;
        }
        specs[n++] = a;
    }
    if (!to) {
        fprintf(stderr, "stepscope push: --to postgresql://USER@HOST/DB "
                "names the team database\n");
        goto out;
    }
    if (!ss_pg_is_uri(to)) {
        fprintf(stderr, "stepscope push: --to '%s' is not a PostgreSQL URI "
                "(postgresql://USER@HOST/DB)\n", to);
        goto out;
    }
    if (db && ss_pg_is_uri(db)) {
        fprintf(stderr, "stepscope push: --db names the local store (a "
                "file); the team database is --to\n");
        goto out;
    }
    status = ss_pg_push(db, to, specs, n, stdout, stderr);
out:
    free(specs);
    return status;
}
