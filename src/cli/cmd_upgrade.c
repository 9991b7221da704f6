/*
 * cmd_upgrade.c - `stepscope upgrade` (commands.h): brings an existing
 * store up to this version.
 *
 *   stepscope upgrade [--db PATH]
 *
 * It is the one command besides `run` that writes to a store: it opens the
 * store through the writer (store.h), which migrates the schema and, on
 * closing, folds a write-ahead log left behind into the file
 * (docs/store.md).  It never creates a store.  Exit status 0, 1 when the
 * store is missing or cannot be opened for writing, 2 for a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "pg_conn.h"
#include "pg_schema.h"
#include "store.h"
#include "store_schema.h"

static const char usage[] =
    "usage: stepscope upgrade [--db PATH | --db postgresql://...]\n"
    "\n"
    "Brings a store written by an older stepscope up to this version's\n"
    "schema, and folds a write-ahead log that a stopped writer left beside\n"
    "it (PATH-wal) into the file, so that it can be read where it cannot be\n"
    "written (docs/store.md).  Run it as a user who may write the store and\n"
    "its directory; the readers (report, runs, trace, serve) never write.\n"
    "\n"
    "  --db PATH    the store; default: $XDG_DATA_HOME/stepscope/stepscope.db\n"
    "               or ~/.local/share/stepscope/stepscope.db; a team database\n"
    "               (postgresql://USER@HOST/DB) gets its schema created or\n"
    "               brought up to date, as a role that may create tables\n"
    "  -h, --help   print this help\n";

/* The team database URI: its schema created or migrated. */
static int upgrade_team(const char *uri)
{
    char err[1024];
    ss_pg *c = ss_pg_connect(uri, err, sizeof err);
    int was = c ? ss_pg_schema_migrate(c, err, sizeof err) : -1;
    ss_pg_close(c);
    if (was < 0) {
        fprintf(stderr, "stepscope upgrade: %s%s\n", err,
                strstr(err, "permission denied")
                    ? " (this role may not change the schema: upgrade as "
                      "the role that owns the stepscope tables)"
                    : "");
        return 1;
    }
    if (was == SS_PG_SCHEMA_VERSION)
        printf("stepscope upgrade: %s is at team schema version %d; "
               "nothing to do\n", uri, SS_PG_SCHEMA_VERSION);
    else if (was == 0)
        printf("stepscope upgrade: created the stepscope schema (team "
               "schema version %d) in %s\n", SS_PG_SCHEMA_VERSION, uri);
    else
        printf("stepscope upgrade: %s brought from team schema version %d "
               "to %d\n", uri, was, SS_PG_SCHEMA_VERSION);
    return 0;
}

int ss_cmd_upgrade(int argc, char **argv)
{
    const char *db = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (strcmp(a, "--db") == 0 || strncmp(a, "--db=", 5) == 0) {
            db = a[4] == '=' ? a + 5 : (i + 1 < argc ? argv[++i] : NULL);
            if (!db || !*db) {
                fprintf(stderr, "stepscope upgrade: --db needs a path\n");
                return 2;
            }
            continue;
        }
        fprintf(stderr, "stepscope upgrade: unexpected argument '%s' (see "
                        "`stepscope upgrade --help`)\n", a);
        return 2;
    }
    char path[4096], msg[1024];
    if (ss_pg_is_uri(db))
        return upgrade_team(db);
    if (db) {
        snprintf(path, sizeof path, "%s", db);
    } else if (ss_store_default_path(path, sizeof path) != 0) {
        fprintf(stderr, "stepscope upgrade: neither XDG_DATA_HOME nor HOME "
                        "is set: use --db PATH\n");
        return 1;
    }
    /* The writer creates a missing store: upgrade must not. */
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "stepscope upgrade: %s: %s\n", path,
                errno == ENOENT ? "no store there" : strerror(errno));
        return 1;
    }
    ss_store *s = ss_store_open(path, NULL, 0, msg, sizeof msg);
    if (!s) {
        fprintf(stderr, "stepscope upgrade: %s\n", msg);
        return 1;
    }
    ss_store_close(s);
    printf("stepscope upgrade: %s is at store schema version %d\n", path,
           SS_SCHEMA_VERSION);
    return 0;
}
