/*
 * headline.h - the one answer every view leads with (docs/report.md).
 *
 * A run's headline is its first finding in the store's order (critical
 * first, then by first step, then by id: ss_reader_findings), stated as
 * the ranks it names, the phase it blames and its kind:
 *
 *   rank 2 · phase compute · critical straggler
 *
 * The text report, `stepscope top`, the end-of-run summary and the
 * dashboard (web/findings.js, the same words) all put it first, so that
 * no two of them can lead with different answers.
 */
#ifndef SS_HEADLINE_H
#define SS_HEADLINE_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

/* Appends the headline of a finding of KIND and SEVERITY that names
 * RANKS[0..N_RANKS) and blames PHASE (NULL or "": none) to OUT, e.g.
 * "rank 2 · phase compute · critical straggler" or "ranks 0,1,3 ·
 * warning jitter"; more than 8 ranks are listed as the first 8, "…" and
 * the count.  Underscores in KIND read as spaces. */
void ss_headline(ss_buf *out, const char *kind, const char *severity,
                 const int64_t *ranks, size_t n_ranks, const char *phase);

/* Appends the headline of the latest attempt of run RUN_ID in the store
 * at DB_PATH (its first finding, in the order of ss_reader_findings) to
 * OUT.  Returns 1 when there is one, 0 when the run has no finding or the
 * store cannot be read (the headline is then simply not said). */
int ss_headline_of_run(const char *db_path, int64_t run_id, ss_buf *out);

#endif
