/*
 * pg_conn.c - connecting to a team database (pg_conn.h).
 *
 * The URI is checked before libpq sees it: the scheme, and no password in
 * its user part or its query (password=), so that a password never sits
 * in a shell history, a process list or a run's command line.  libpq then
 * reads it from PGPASSFILE, ~/.pgpass or PGPASSWORD.  A connect timeout of
 * 5 s is the default, so an unreachable server is one line after 5 s, not
 * a hang (the URI may set its own connect_timeout).
 */
#include "pg_conn.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pg_internal.h"


int ss_pg_is_uri(const char *s)
{
    return s && (strncmp(s, "postgresql://", 13) == 0 ||
                 strncmp(s, "postgres://", 11) == 0);
}

void ss_pg_error_line(char *err, size_t errlen, const char *prefix,
                      const char *msg)
{
    if (!msg || !*msg)
        msg = "no reason given";
    /* libpq prefixes the server's words with "FATAL:  " or "ERROR:  " and
     * may put its own context on the lines before ("connection to server
     * on socket ... failed: FATAL: ..."); all of it on one line. */
    char line[768];
    size_t n = 0;
    for (const char *p = msg; *p && n + 1 < sizeof line; p++) {
        char ch = *p == '\n' || *p == '\t' ? ' ' : *p;
        if (ch == ' ' && (n == 0 || line[n - 1] == ' '))
            continue;
        line[n++] = ch;
    }
    while (n && line[n - 1] == ' ')
        n--;
    line[n] = '\0';
    snprintf(err, errlen, "%s%s", prefix, line);
}

/* 1 when URI carries a password: "user:password@" in its authority, or a
 * password= parameter in its query. */
static int has_password(const char *uri)
{
    const char *auth = strstr(uri, "://") + 3;
    size_t len = strcspn(auth, "/?");
    const char *at = memchr(auth, '@', len);
    if (at && memchr(auth, ':', (size_t)(at - auth)))
        return 1;
    const char *q = strchr(uri, '?');
    for (; q; q = strchr(q + 1, '&'))
        if (strncasecmp(q + 1, "password=", 9) == 0)
            return 1;
    return 0;
}

ss_pg *ss_pg_connect(const char *uri, char *err, size_t errlen)
{
    if (!ss_pg_is_uri(uri)) {
        snprintf(err, errlen, "'%s' is not a PostgreSQL URI (postgresql://"
                 "USER@HOST/DBNAME)", uri ? uri : "");
        return NULL;
    }
    if (has_password(uri)) {
        snprintf(err, errlen, "refusing a database URI with a password in "
                 "it: put the password in ~/.pgpass (or PGPASSFILE, "
                 "PGPASSWORD) and give the URI without it");
        return NULL;
    }
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(uri, &msg);
    if (!opts) {
        char prefix[512];
        snprintf(prefix, sizeof prefix, "%s is not a valid database URI: ",
                 uri);
        ss_pg_error_line(err, errlen, prefix, msg ? msg : "out of memory");
        PQfreemem(msg);
        return NULL;
    }
    PQconninfoFree(opts);
    /* Earlier keywords are overridden by the URI's own (expand_dbname). */
    const char *keys[] = {"connect_timeout", "application_name", "dbname",
                          NULL};
    const char *vals[] = {"5", "stepscope", uri, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (!c) {
        snprintf(err, errlen, "%s: out of memory", uri);
        return NULL;
    }
    if (PQstatus(c) != CONNECTION_OK) {
        char prefix[512];
        snprintf(prefix, sizeof prefix, "cannot connect to %s: ", uri);
        ss_pg_error_line(err, errlen, prefix, PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    /* Quiet: NOTICEs (e.g. "relation already exists, skipping") are not
     * the user's business. */
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    ss_pg *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        PQfinish(c);
        return NULL;
    }
    p->c = c;
    snprintf(p->uri, sizeof p->uri, "%s", uri);
    return p;
}

int ss_pg_backend_pid(ss_pg *c)
{
    return PQbackendPID(c->c);
}

void ss_pg_close(ss_pg *c)
{
    if (!c)
        return;
    PQfinish(c->c);
    free(c);
}

int ss_pg_exec(ss_pg *c, const char *sql, const char *what,
               char *err, size_t errlen)
{
    PGresult *res = PQexec(c->c, sql);
    ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        PQclear(res);
        return 0;
    }
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s: ", what);
    ss_pg_error_line(err, errlen, prefix, PQerrorMessage(c->c));
    PQclear(res);
    return -1;
}
