/*
 * pg_internal.h - what the team-database modules (pg_*.c) share: the
 * connection behind ss_pg.  Internal to the store folder.
 */
#ifndef STEPSCOPE_PG_INTERNAL_H
#define STEPSCOPE_PG_INTERNAL_H

#include <libpq-fe.h>

#include "pg_conn.h"

struct ss_pg {
    PGconn *c;
    char uri[1024]; /* as given, for messages (never holds a password) */
};

#endif
