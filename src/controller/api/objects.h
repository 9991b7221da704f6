/*
 * objects.h - the JSON objects the API documents and the event stream share.
 *
 * A step and a finding reach a client two ways: from the store, inside the
 * documents of query.c (/steps, /findings), and from the controller's
 * memory, as server-sent events of live.c.  Both are written here, from
 * the same functions, so the two are byte for byte the same object
 * (docs/api.md; query_test checks it).  This module knows JSON (json.h)
 * and the controller's data model (model.h) and nothing else: no SQLite,
 * no live state.
 *
 * Every function appends to OUT; an allocation failure sets OUT->oom (the
 * caller checks it once, at the end of its document).  Durations are given
 * in nanoseconds and written as milliseconds; SS_MISSING is written null.
 */
#ifndef STEPSCOPE_OBJECTS_H
#define STEPSCOPE_OBJECTS_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "model.h"

/* ---- a step ---- */

/* The statistics object {"min","median","p90","max","worst_rank"} of a
 * duration. */
void ss_obj_stat(ss_buf *out, int64_t min_ns, int64_t median_ns,
                 int64_t p90_ns, int64_t max_ns, int64_t worst_rank);

/* The member NAME:{"min","median","p90","max","worst_rank","self"} of
 * "phases": the statistics of the phase's duration INCL over the ranks,
 * and "self" {"median","max","worst_rank"} of its self time SELF (the
 * phase less the phases nested in it), null when SELF_N is 0 (no rank
 * recorded self time).  INCL and SELF hold min, median, p90, max (ns) and
 * the worst rank. */
void ss_obj_phase(ss_buf *out, const char *name, const int64_t incl[5],
                  int64_t self_n, const int64_t self[5]);

/* The member NAME:{"skew_ms","late_ms","worst_rank"} of "syncs". */
void ss_obj_sync(ss_buf *out, const char *name, int64_t skew_ns,
                 int64_t late_ns, int64_t worst_rank);

/* The member ,"KEY":{"median","max","worst_rank"} of a memory statistic in
 * bytes (KEY is "rss_bytes" or "device_bytes"), with its leading comma. */
void ss_obj_mem(ss_buf *out, const char *key, int64_t median, int64_t max,
                int64_t worst_rank);

/* One element of "steps" (/api/runs/{id}/steps), built from a finalized
 * step as the aggregator hands it out; NAMES maps the run's name indexes
 * to names (an unknown index is written "?").  Phases and syncs are
 * ordered by name, as the store's keys order them, so the object equals
 * what the steps document returns for the step once stored. */
void ss_obj_step(ss_buf *out, const ss_step_view *v,
                 const char *const *names);

/* ---- a finding ---- */

/* A finding as the store keeps it, in the order of the finding object. */
typedef struct {
    int64_t id;
    const char *kind;
    const char *severity;  /* "critical" or "warning" */
    const int64_t *ranks;  /* n_ranks of them */
    size_t n_ranks;
    const char *phase;     /* NULL: written null */
    int64_t first_step, last_step;
    const char *evidence;  /* a JSON object, written as it is */
    const char *message;
} ss_obj_finding_fields;

/* One element of "findings" from its stored fields. */
void ss_obj_finding_stored(ss_buf *out, const ss_obj_finding_fields *f);

/* The same object from a finding as the detectors emit it: what
 * ss_obj_finding_stored writes for it once stored.  An evidence that is
 * not a JSON object is written {}, an empty phase null. */
void ss_obj_finding(ss_buf *out, const ss_finding *f);

#endif
