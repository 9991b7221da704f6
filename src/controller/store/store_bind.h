/*
 * store_bind.h - binding the store's values to SQL parameters, and the
 * JSON objects of a rank-step row.
 *
 * The conventions every write of the store follows: SS_MISSING binds as
 * NULL (unknown), -1 and "" as NULL where a field says "leave as it is",
 * a negative rank as NULL (none).  A rank-step row keeps its phases,
 * syncs and metrics as JSON objects {name: value}; a step's names are
 * escaped once into a key set and reused for every row.  Pure functions
 * over SQLite statements and buffers: no store state.  Internal to the
 * store folder.
 */
#ifndef STEPSCOPE_STORE_BIND_H
#define STEPSCOPE_STORE_BIND_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "model.h"

/* Binds V to parameter I of ST, SS_MISSING as NULL. */
void ss__bind_opt_int(sqlite3_stmt *st, int i, int64_t v);

/* Binds RANK to parameter I of ST, a negative one as NULL. */
void ss__bind_rank(sqlite3_stmt *st, int i, int32_t rank);

/* Binds V (S) to parameter I of ST, -1 ("" or NULL) as NULL: "leave the
 * column as it is" in the store's upserts.  S is bound SQLITE_STATIC: it
 * must outlive the step. */
void ss__bind_known_int(sqlite3_stmt *st, int i, int64_t v);
void ss__bind_known_text(sqlite3_stmt *st, int i, const char *s);

/* Binds the JSON text in B to parameter I of ST (static), NULL when B is
 * empty. */
void ss__bind_json(sqlite3_stmt *st, int i, const ss_buf *b);

/* Binds the host and GPU evidence H of a rank step to the parameters of
 * store_sql.h's SS__HOST_FIRST_PARAM and SS__GPU_FIRST_PARAM on; NULL, or
 * evidence without a GPU, binds NULL to those columns. */
void ss__bind_host(sqlite3_stmt *st, const ss_host_step *h);

/* A step's names escaped once as JSON keys: name i is `,"name":` at
 * text.data[off[i] .. off[i + 1]).  Zeroed is empty; reused step after
 * step. */
typedef struct {
    ss_buf text;
    size_t *off; /* cap entries */
    size_t cap;
} ss__json_keys;

/* Sets K to the N NAMES.  Returns 0, or -1 when out of memory. */
int ss__json_keys_set(ss__json_keys *k, char *const *names, uint32_t n);

/* Frees what K holds and zeroes it. */
void ss__json_keys_free(ss__json_keys *k);

/* Builds into B the JSON object {name: value} of the N values VALS that
 * are neither SS_MISSING nor OMIT, named by K.  B->len is 0 when no value
 * is left.  Returns 0, or -1 when out of memory. */
int ss__json_object(ss_buf *b, const int64_t *vals, uint32_t n,
                    const ss__json_keys *k, int64_t omit);

/* Like ss__json_object for N metric values stored as the bits of doubles;
 * NaN and infinities (not JSON) are left out. */
int ss__json_doubles(ss_buf *b, const int64_t *bits, uint32_t n,
                     const ss__json_keys *k);

/* Builds into B a rank row's phase_self (docs/store.md): the JSON object
 * {name: self ns} of the N phases whose self time SELF differs from their
 * total TOTAL; "{}" when every reported self time equals its total; empty
 * (NULL) when no self time is known.  Returns 0, or -1 when out of
 * memory. */
int ss__json_self(ss_buf *b, const int64_t *total, const int64_t *self,
                  uint32_t n, const ss__json_keys *k);

#endif
