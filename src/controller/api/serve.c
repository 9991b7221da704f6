/*
 * serve.c - `stepscope serve` (serve.h): the HTTP API and dashboard over
 * a store.
 *
 * Opens the store read-only (so a missing or foreign file is refused with
 * the store's own message before anything listens), starts the HTTP server
 * without a live run and waits for SIGINT or SIGTERM.  Outside loopback it
 * makes a random token and prints it with the URL.  It raises its soft
 * open-file limit (up to the hard one) so that the server's connection
 * limit, half of it, can be SS_HTTP_MAX_CONNECTIONS.
 */
#include "serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include "http.h"
#include "pg_conn.h"
#include "pg_mirror.h"
#include "query.h"
#include "store.h"

/* A random token of 32 hex digits into OUT (33 bytes). */
static int make_token(char *out)
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t k = getrandom(b + got, sizeof b - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    for (size_t i = 0; i < sizeof b; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
    return 0;
}

int ss_serve(const ss_serve_opts *o)
{
    const char *db = o->db;
    const char *host = o->host ? o->host : "127.0.0.1";
    char err[512];
    char defpath[4096];
    if (!db) {
        if (ss_store_default_path(defpath, sizeof defpath) != 0) {
            fprintf(stderr, "stepscope serve: no HOME or XDG_DATA_HOME for "
                    "the default store; pass --db PATH\n");
            return 1;
        }
        db = defpath;
    }
    if (ss_pg_is_uri(db)) {
        /* A team database: its local copy is read again every interval,
         * so the runs its jobs copy there show up (pg_mirror.h). */
        const char *env = getenv("STEPSCOPE_TEAM_REFRESH_S");
        unsigned every = env && atoi(env) > 0 ? (unsigned)atoi(env)
                                              : SS_SERVE_TEAM_REFRESH_S;
        if (ss_pg_mirror_follow(db, every, err, sizeof err) != 0) {
            fprintf(stderr, "stepscope serve: %s\n", err);
            return 1;
        }
        fprintf(stderr, "stepscope serve: the team database's runs are read "
                "again every %u s\n", every);
    }
    ss_query *q = ss_query_open(db, err, sizeof err);
    if (!q) {
        fprintf(stderr, "stepscope serve: %s\n", err);
        return 1;
    }
    ss_query_close(q);

    char token[33] = "";
    int loopback = ss_http_is_loopback(host);
    if (!loopback && make_token(token) != 0) {
        fprintf(stderr, "stepscope serve: no random source for a token\n");
        return 1;
    }
    /* Room for SS_HTTP_MAX_CONNECTIONS: the server takes at most half the
     * open-file limit, and serve starts no children that would inherit a
     * raised one. */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
        nofile.rlim_cur < 2 * SS_HTTP_MAX_CONNECTIONS + 64) {
        rlim_t want = 2 * SS_HTTP_MAX_CONNECTIONS + 64;
        nofile.rlim_cur = nofile.rlim_max < want ? nofile.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    /* Block the signals before the server's threads start, so that only
     * sigwait below receives them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    ss_http_config cfg = {host, o->port, o->fallback, db, NULL,
                          loopback ? NULL : token, NULL, NULL, NULL, NULL,
                          NULL, NULL};
    ss_http *h = ss_http_start(&cfg, err, sizeof err);
    if (!h) {
        fprintf(stderr, "stepscope serve: %s\n", err);
        return 1;
    }
    if (ss_http_fell_back(h))
        fprintf(stderr, "stepscope serve: port %u is busy; took %u "
                "instead\n", o->port, ss_http_port(h));
    if (loopback)
        fprintf(stderr, "stepscope serve: serving %s at %s (Ctrl-C to "
                "stop)\n", db, ss_http_url(h));
    else
        fprintf(stderr, "stepscope serve: serving %s at %s?token=%s "
                "(Ctrl-C to stop)\n", db, ss_http_url(h), token);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "stepscope serve: %s, stopping\n", strsignal(sig));
    ss_http_stop(h);
    return 0;
}
