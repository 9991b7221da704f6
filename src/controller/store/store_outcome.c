/*
 * store_outcome.c - loss accounting: what became of every item put
 * (store_outcome.h).
 *
 * ss_store_outcome is how the controller knows what the file holds: each
 * item is counted once, stored or lost, when its batch commits or is
 * given up, or when a put cannot even queue it (out of memory, a node
 * with an unknown state).  The first loss's reason is kept in words.  A
 * finding is counted stored once per (run, attempt, id), however many
 * versions of it were written: the writer keeps one bit per committed
 * finding id in the run's track.
 */
#include "store_outcome.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_retention.h"

/* Marks finding ID of RUN_ID/ATTEMPT committed (dbmu held).  Returns 1
 * the first time, else 0 (also when out of memory: never over-claim). */
static int first_commit_of_finding(ss_store *s, int64_t run_id,
                                   uint32_t attempt, uint32_t id)
{
    track *t = ss__track_get(s, run_id, attempt, 0);
    if (!t)
        return 0;
    uint32_t byte = id / 8;
    if (byte >= t->committed_findings_bytes) {
        uint32_t n = byte + 64;
        uint8_t *bits = realloc(t->committed_findings, n);
        if (!bits)
            return 0;
        memset(bits + t->committed_findings_bytes, 0,
               n - t->committed_findings_bytes);
        t->committed_findings = bits;
        t->committed_findings_bytes = n;
    }
    uint8_t bit = (uint8_t)(1u << (id % 8));
    if (t->committed_findings[byte] & bit)
        return 0;
    t->committed_findings[byte] |= bit;
    return 1;
}

void ss__outcome_tally(ss_store *s, const item *it, int stored,
                       ss_store_outcome *o)
{
    switch (it->kind) {
    case IT_STEP:
        if (stored) {
            o->steps_stored++;
            o->rank_steps_stored += it->u.step.n_rows;
        } else {
            o->steps_lost++;
            o->rank_steps_lost += it->u.step.n_rows;
        }
        break;
    case IT_VALUES:
        if (stored)
            o->vectors_stored += it->u.values.n;
        else
            o->vectors_lost += it->u.values.n;
        break;
    case IT_FINDING:
        if (!stored)
            o->finding_writes_lost++;
        else if (first_commit_of_finding(s, it->run_id,
                                         it->u.finding.f.attempt,
                                         it->u.finding.f.id))
            o->findings_stored++;
        break;
    case IT_EVENT:
        stored ? o->events_stored++ : o->events_lost++;
        break;
    case IT_END_RUN:
        stored ? o->ends_stored++ : o->ends_lost++;
        break;
    case IT_ATTEMPT:
    case IT_ATTEMPT_FACTS:
    case IT_LABELS:
    case IT_DROPPED_VECTORS:
    case IT_RANK:
    case IT_NODE:
    case IT_STACKS:
    case IT_PROFILE:
        if (!stored)
            o->other_lost++;
        break;
    }
}

void ss__outcome_add(ss_store *s, const ss_store_outcome *d,
                        const char *why)
{
    ss_store_outcome *o = &s->outcome;
    o->steps_stored += d->steps_stored;
    o->steps_lost += d->steps_lost;
    o->rank_steps_stored += d->rank_steps_stored;
    o->rank_steps_lost += d->rank_steps_lost;
    o->findings_stored += d->findings_stored;
    o->finding_writes_lost += d->finding_writes_lost;
    o->events_stored += d->events_stored;
    o->events_lost += d->events_lost;
    o->other_lost += d->other_lost;
    o->ends_stored += d->ends_stored;
    o->ends_lost += d->ends_lost;
    o->vectors_stored += d->vectors_stored;
    o->vectors_lost += d->vectors_lost;
    int lost = d->steps_lost || d->rank_steps_lost || d->vectors_lost ||
               d->finding_writes_lost || d->events_lost || d->other_lost ||
               d->ends_lost;
    if (lost && !o->error[0])
        snprintf(o->error, sizeof o->error, "%s", why && *why ? why
                                                              : "unknown");
}

void ss__outcome_lost_at_put(ss_store *s, item_kind kind, uint32_t rows,
                             const char *why)
{
    item lost;
    memset(&lost, 0, sizeof lost);
    lost.kind = kind;
    if (kind == IT_STEP)
        lost.u.step.n_rows = rows;
    else if (kind == IT_VALUES)
        lost.u.values.n = rows;
    ss_store_outcome d;
    memset(&d, 0, sizeof d);
    ss__outcome_tally(s, &lost, 0, &d);
    pthread_mutex_lock(&s->mu);
    ss__outcome_add(s, &d, why);
    pthread_mutex_unlock(&s->mu);
}
