/*
 * serve.h - `stepscope serve`: the HTTP API and dashboard over a store,
 * without a live run.
 *
 *   stepscope serve [--db PATH] [--http ADDR:PORT]
 *
 * Serves every run in the store (docs/api.md) until Ctrl-C or SIGTERM.
 * /api/live answers 404 and /metrics has no run series.
 */
#ifndef STEPSCOPE_SERVE_H
#define STEPSCOPE_SERVE_H

/* Entry point of `stepscope serve`; ARGV[0] is "serve".  Returns 0 after a
 * signal, 1 when the store cannot be opened or the server cannot start, 2
 * for a usage error. */
int ss_serve_main(int argc, char **argv);

#endif
