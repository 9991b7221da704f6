/*
 * serve.h - the work of `stepscope serve` (its command line: src/cli/
 * cmd_serve.c): the HTTP API and dashboard over a store, without a live
 * run.
 *
 * Serves every run in the store (docs/api.md) until Ctrl-C or SIGTERM.
 * /api/live answers 404 and /metrics has no run series.
 */
#ifndef STEPSCOPE_SERVE_H
#define STEPSCOPE_SERVE_H

#include <stdint.h>

/* A team database (db a postgresql:// URI) is read again this often
 * unless STEPSCOPE_TEAM_REFRESH_S says otherwise (docs/store.md). */
#define SS_SERVE_TEAM_REFRESH_S 10

/* `stepscope serve`'s options, checked by its front-end. */
typedef struct {
    const char *db;   /* the store, or a team database's URI; NULL:
                       * ss_store_default_path() */
    const char *host; /* a numeric address to listen on; NULL: 127.0.0.1 */
    uint16_t port;    /* 0: any free port */
    int fallback;     /* the port is busy: take any free one instead */
} ss_serve_opts;

/* Serves the store of O until SIGINT, SIGTERM or SIGHUP, messages on
 * stderr ("stepscope serve: ...").  Returns the exit status: 0 after a
 * signal, 1 when the store cannot be opened or the server cannot start. */
int ss_serve(const ss_serve_opts *o);

#endif
