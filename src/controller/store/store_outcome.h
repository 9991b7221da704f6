/*
 * store_outcome.h - counting what was stored and what was lost
 * (ss_store_outcome).  Internal to the store folder.
 */
#ifndef STEPSCOPE_STORE_OUTCOME_H
#define STEPSCOPE_STORE_OUTCOME_H

#include "store_state.h"

/* Adds the fate of IT (committed when STORED) to *O.  With STORED, dbmu
 * must be held (the committed-findings bits are writer state). */
void ss__outcome_tally(ss_store *s, const item *it, int stored,
                       ss_store_outcome *o);

/* Adds a batch's tallies D to S's outcome (mu held); WHY names the first
 * loss when D holds one and none was named before. */
void ss__outcome_add(ss_store *s, const ss_store_outcome *d,
                     const char *why);

/* Counts an item of KIND that a put could not queue as lost (ROWS: the
 * rank-step rows of a step, or the vectors of a step's values), with WHY
 * as the reason.  Takes mu; call without it. */
void ss__outcome_lost_at_put(ss_store *s, item_kind kind, uint32_t rows,
                             const char *why);

#endif
