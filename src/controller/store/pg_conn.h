/*
 * pg_conn.h - a connection to a team database (PostgreSQL) from a libpq
 * URI, with stepscope's rules for it (docs/store.md, "A team's store").
 *
 * A store argument that begins `postgresql://` or `postgres://` names a
 * PostgreSQL database instead of a SQLite file.  The password never comes
 * from the command line: a URI that carries one is refused, and libpq
 * reads it from PGPASSFILE, ~/.pgpass or PGPASSWORD.  Every failure is one
 * line with the server's (or libpq's) own words and the URI.
 */
#ifndef STEPSCOPE_PG_CONN_H
#define STEPSCOPE_PG_CONN_H

#include <stddef.h>

typedef struct ss_pg ss_pg;

/* 1 when S names a team database (a postgresql:// or postgres:// URI). */
int ss_pg_is_uri(const char *s);

/*
 * Connects to the database URI names.  Refuses (NULL, with a one-line
 * reason in ERR) a URI with a password in it, a server that cannot be
 * reached within 5 s (unless the URI sets connect_timeout), a wrong
 * password or role; ERR then carries the server's first line.  The
 * connection is synchronous (libpq's blocking calls); use it from one
 * thread at a time and close it with ss_pg_close.
 */
ss_pg *ss_pg_connect(const char *uri, char *err, size_t errlen);

/* The process id of C's server process (what bench_store measures). */
int ss_pg_backend_pid(ss_pg *c);

/* Closes C; NULL is a no-op. */
void ss_pg_close(ss_pg *c);

/* Runs SQL (one or more statements, no parameters) on C.  Returns 0, or
 * -1 with "WHAT: the server's words" in ERR. */
int ss_pg_exec(ss_pg *c, const char *sql, const char *what,
               char *err, size_t errlen);

/* Copies the first line of libpq's message MSG into ERR after PREFIX
 * (the server's multi-line messages become one line). */
void ss_pg_error_line(char *err, size_t errlen, const char *prefix,
                      const char *msg);

#endif
