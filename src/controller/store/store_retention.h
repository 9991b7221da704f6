/*
 * store_retention.h - the writer's state per (run, attempt): the per-rank
 * totals a batch accumulates and how far its rows have been pruned.
 * Every function here runs on the writer with dbmu held.  Internal to the
 * store folder.
 */
#ifndef STEPSCOPE_STORE_RETENTION_H
#define STEPSCOPE_STORE_RETENTION_H

#include "store_state.h"

/* The track of RUN_ID's ATTEMPT, created when new, with room for the
 * deltas of at least N_RANKS ranks.  NULL when out of memory. */
track *ss__track_get(ss_store *s, int64_t run_id, uint32_t attempt,
                     uint32_t n_ranks);

/* Counts a rank-step row of RANK (STEP_NS, RSS and DEVICE SS_MISSING when
 * unknown) at STEP into T's batch deltas; a rank beyond T's is ignored. */
void ss__track_count_row(track *t, uint32_t rank, int64_t step_ns,
                         int64_t rss, int64_t device, int64_t step);

/* After a batch's items, in its transaction: with TOTALS, adds every
 * track's owed and batch deltas to rank_totals; prunes rank_steps and
 * rank_values rows that left their windows, and adds the vectors refused
 * at the queue to their run's dropped_vectors.  Returns 0, or -1
 * (reported; the caller rolls back and calls ss__tracks_forget_batch). */
int ss__retention_finish(ss_store *s, int totals);

/* After a batch committed: the deltas it wrote to rank_totals are
 * forgotten, those it did not are owed to a later one.  Returns whether
 * some are owed. */
int ss__tracks_committed(ss_store *s);

/* Forgets every track's batch deltas (after a batch is lost); what is
 * owed stays owed. */
void ss__tracks_forget_batch(ss_store *s);

/* Frees every track. */
void ss__tracks_free(ss_store *s);

#endif
