/*
 * pg_internal.h - what the team-database modules (pg_*.c) share: the
 * connection behind ss_pg (pg_conn.h).  Internal to the store folder; it
 * names libpq's connection without including libpq's header, so that no
 * other stage needs libpq to compile.
 */
#ifndef STEPSCOPE_PG_INTERNAL_H
#define STEPSCOPE_PG_INTERNAL_H

struct pg_conn; /* libpq's PGconn */

struct ss_pg {
    struct pg_conn *c;
    char uri[1024]; /* as given, for messages (never holds a password) */
};

#endif
