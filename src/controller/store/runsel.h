/*
 * runsel.h - opening the store for reading and choosing a run in it, for
 * the commands that read runs (`stepscope trace`, `stepscope top`).
 *
 * The rules are those of `stepscope report` (docs/store.md): the store is
 * --db PATH or the default path; it is opened read-only and never created;
 * a store from an older stepscope is migrated first (the only case where a
 * reader writes).  A run is named by its numeric id, by its name (the
 * latest run of that name) or by a prefix of its uuid; the latest run when
 * none is named.
 */
#ifndef STEPSCOPE_RUNSEL_H
#define STEPSCOPE_RUNSEL_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct sqlite3;

/* An open store, for reading. */
typedef struct {
    char path[4096];
    struct sqlite3 *db;
    ss_store *store; /* set when the store had to be migrated */
} ss_store_reader;

/*
 * Opens the store at PATH (NULL: ss_store_default_path()) into *R.
 * Returns 0, or -1 with a one-line reason in ERR (no store, not a store,
 * newer version, corrupt, no HOME).  Close with ss_store_reader_close.
 */
int ss_store_reader_open(ss_store_reader *r, const char *path, char *err,
                         size_t errlen);

/* Closes R; a closed or never opened (zeroed) reader is a no-op. */
void ss_store_reader_close(ss_store_reader *r);

/*
 * Finds the run SPEC names (NULL: the latest run) and stores its id in
 * *RUN_ID.  Returns 0, or -1 with a one-line reason in ERR: no runs yet,
 * no such run, an ambiguous uuid prefix, or a store error.
 */
int ss_run_select(struct sqlite3 *db, const char *spec, int64_t *run_id,
                  char *err, size_t errlen);

#endif
