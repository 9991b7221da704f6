/*
 * reader_internal.h - what the reader's files share: the reader itself,
 * the schema versions the queries depend on, and the one row-reading
 * helper every loader goes through.
 *
 * The read API of reader.h is implemented by reader.c (opening, errors,
 * the row helper, runs and attempts), reader_ranks.c (ranks, nodes,
 * profiles), reader_steps.c (steps, rank steps, host evidence, metrics),
 * reader_findings.c (findings, events, stack snapshots) and
 * reader_values.c (vectors).  Only these files include this header.
 *
 * A loader describes its query (SQL text and parameters) and what to do
 * with one row; ss__rd_each prepares, binds, steps, hands each row over,
 * finalizes and maps SQLite's errors to SS_READ_ERROR with the reason kept
 * on the reader.  ss__rd_collect does the same into a growing array of
 * plain structs, freed whole on error; ss__rd_one reads at most one row.
 *
 * The including file includes reader.h first (this header names the
 * reader as struct ss_reader so that it does not depend on reader.h: the
 * include graph of the folder stays one-way).
 */
#ifndef STEPSCOPE_READER_INTERNAL_H
#define STEPSCOPE_READER_INTERNAL_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "store_schema.h"

/* The oldest schema version read as it is.  Raise it only when a migration
 * removes or changes what the queries read; a store older than this is
 * refused with a message naming `stepscope upgrade`. */
#define SS_READER_OLDEST_SCHEMA 1
/* The version that added rank_steps' timeline columns (begin_ns,
 * phase_starts, phase_counts, syncs), and the one that added metrics. */
#define SCHEMA_TIMELINES 2
#define SCHEMA_METRICS 3
#define SCHEMA_NAME_LIMIT 4
/* The version that added runs.fingerprint. */
#define SCHEMA_FINGERPRINT 5
/* The version that added self time (step_phases.self_*,
 * rank_steps.phase_self). */
#define SCHEMA_SELF 6
#define SCHEMA_HOST SS_SCHEMA_HOST
#define SCHEMA_GPU SS_SCHEMA_GPU
#define SCHEMA_NODES SS_SCHEMA_NODES
#define SCHEMA_PROFILES SS_SCHEMA_PROFILES
/* The version that added vectors (rank_values, value_labels,
 * runs.dropped_vectors). */
#define SCHEMA_VALUES 13

/* The host columns of rank_steps, in ss_host_step's order (11). */
#define HOST_SELECT                                                           \
    "host_cpu_ns, host_runq_ns, host_stopped_ns, host_throttled_ns, "        \
    "host_nr_throttled, host_vol_switches, host_invol_switches, "             \
    "host_major_faults, host_psi_cpu_ns, host_psi_memory_ns, host_psi_io_ns"
#define HOST_SELECT_NONE                                                      \
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
#define HOST_FIELDS 11
/* The GPU columns, in ss_gpu_evidence's order from the index on (11). */
#define GPU_SELECT                                                            \
    "gpu_index, gpu_covered_ns, gpu_slowed_ns, gpu_power_cap_ns, "            \
    "gpu_thermal_ns, gpu_hw_slowdown_ns, gpu_sm_clock_mhz, "                  \
    "gpu_temperature_c, gpu_ecc_new, gpu_xid_new, gpu_last_xid"
#define GPU_SELECT_NONE HOST_SELECT_NONE
#define GPU_FIELDS 11

struct ss_reader {
    sqlite3 *db;
    int version;
    void (*tick)(void *);
    void *tick_arg;
    char path[4096]; /* as given: a file, or a team database's URI */
    int team;        /* a team database (pg_mirror.h): the stored status
                      * of a run is the server's, never a local lock's */
    char err[1024];
};

/* ---- errors ---- */

/* Keeps a reason on R (printf-style) and returns CODE. */
int ss__rd_fail(struct ss_reader *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* SS_READ_ERROR, with "out of memory" kept on R. */
int ss__rd_oom(struct ss_reader *r);

/* ---- the row helper ---- */

/* One query: SQL, the int64 ARGS[0..N_ARGS) bound to ?1..?N_ARGS, and,
 * when TEXT is not NULL, TEXT bound to ?TEXT_AT (static: it must outlive
 * the query). */
typedef struct {
    const char *sql;
    const int64_t *args;
    int n_args;
    const char *text;
    int text_at;
} ss__rd_query;

/* What a loader does with one row ST of its query: returns 0 to go on, 1
 * to stop reading (not an error), or SS_READ_ERROR with the reason kept
 * on R (ss__rd_oom, ss__rd_fail). */
typedef int (*ss__rd_row_fn)(struct ss_reader *r, sqlite3_stmt *st,
                             void *ctx);

/* Runs Q on R, calling EACH(R, row, CTX) for every row until it stops.
 * Returns 0, or SS_READ_ERROR (the query failed, with SQLite's reason
 * kept on R, or EACH failed). */
int ss__rd_each(struct ss_reader *r, const ss__rd_query *q,
                ss__rd_row_fn each, void *ctx);

/* Runs Q on R and calls EACH on its first row only.  Returns 1 when there
 * was a row (and EACH did not fail), 0 when none, or SS_READ_ERROR. */
int ss__rd_one(struct ss_reader *r, const ss__rd_query *q,
               ss__rd_row_fn each, void *ctx);

/* How ss__rd_collect makes an array: elements of SIZE bytes, each zeroed
 * and then filled from one row by FILL(R, row, element, CTX), which
 * returns 0 or SS_READ_ERROR.  FREE_ROWS(rows, n) frees n elements and
 * the array (NULL: the elements own nothing, free(rows)). */
typedef struct {
    size_t size;
    int (*fill)(struct ss_reader *r, sqlite3_stmt *st, void *elem,
                void *ctx);
    void (*free_rows)(void *rows, size_t n);
} ss__rd_rows;

/* Runs Q on R into a new array *ROWS of *N elements made as HOW says.
 * Returns 0, or SS_READ_ERROR with *ROWS NULL and *N 0 (what was read is
 * freed, the element that failed too: it is zeroed before FILL). */
int ss__rd_collect(struct ss_reader *r, const ss__rd_query *q,
                   const ss__rd_rows *how, void *ctx, void *rows,
                   size_t *n);

/* Prepares Q on R: the statement, or NULL with the reason kept on R.
 * For a cursor that outlives one call (ss_rank_steps); loaders use
 * ss__rd_each. */
sqlite3_stmt *ss__rd_prepare(struct ss_reader *r, const ss__rd_query *q);

/* Steps ST: 1 for a row, 0 at the end, SS_READ_ERROR with the reason. */
int ss__rd_step(struct ss_reader *r, sqlite3_stmt *st);

/* One integer (column 0 of the first row) of Q into *OUT; SS_MISSING for
 * NULL or no row.  Returns 0 or SS_READ_ERROR. */
int ss__rd_i64(struct ss_reader *r, const ss__rd_query *q, int64_t *out);

/* 0 when RUN_ID is a run of R, SS_READ_NOT_FOUND or SS_READ_ERROR (with
 * the reason). */
int ss__rd_run_exists(struct ss_reader *r, int64_t run_id);

/* ---- columns and arrays ---- */

/* Integer column I of ST, SS_MISSING for NULL. */
int64_t ss__rd_col_i64(sqlite3_stmt *st, int i);

/* A copy of text column I of ST into *OUT (NULL for SQL NULL).  Returns 0,
 * or -1 when memory ran out. */
int ss__rd_col_dup(sqlite3_stmt *st, int i, char **out);

/* Makes room for one more element in *ARR (SIZE bytes each, N used of
 * *CAP).  Returns 0 or -1 on out-of-memory. */
int ss__rd_grow(void **arr, size_t size, size_t n, size_t *cap);

/* Parses "1,5,7" (a group_concat of integers; NULL is empty) into a new
 * array *OUT of *N.  Returns 0 or -1 on out-of-memory. */
int ss__rd_parse_csv(const char *csv, int64_t **out, size_t *n);

/* The index of NAME in the table *NAMES (*N used of *CAP), added (copied)
 * when new; HINT is where the search starts (names recur in the same
 * order row after row).  Returns the index or -1 on out-of-memory. */
int64_t ss__rd_intern(char ***names, size_t *n, size_t *cap,
                      const char *name, size_t hint);

/* Reverses V[0..N) (rows read newest first, returned oldest first). */
void ss__rd_reverse(void *v, size_t size, size_t n);

#endif
