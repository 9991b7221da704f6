/*
 * store_writer.c - the store's queue and its writer thread
 * (store_writer.h).
 *
 * ss_store_put_* append one heap item each to a queue under `mu`: no SQL,
 * no I/O on the caller's thread.  The writer thread takes the whole queue
 * once the oldest queued item is a flush interval old (or sooner when the
 * queue is half full or ss_store_flush asks), applies it with prepared
 * statements in one IMMEDIATE transaction under `dbmu`, then the rank
 * totals when due and the pruning (store_retention.c), and commits.  A
 * flush finding the queue empty while totals are owed has the writer run
 * a transaction of the totals alone.  A batch that
 * cannot be written (disk full, file locked by another process for more
 * than 5 s) is rolled back, reported on stderr and lost, so a broken disk
 * cannot grow the queue without bound; its small items (ranks, findings,
 * events, the run's end) are then tried once more in a transaction of
 * their own, which often fits where the steps did not.  Either way every
 * item is counted, stored or lost (store_outcome.c).
 *
 * Queue accounting is in "units": one per item plus one per rank-step row
 * the item carries (ss_store_stats).
 */
#include "store_writer.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_apply.h"
#include "store_outcome.h"
#include "store_retention.h"

void ss__store_enqueue(ss_store *s, item *it)
{
    pthread_mutex_lock(&s->mu);
    it->next = NULL;
    if (s->tail)
        s->tail->next = it;
    else {
        s->head = it;
        clock_gettime(CLOCK_MONOTONIC, &s->first_at);
    }
    s->tail = it;
    uint64_t before = s->pending_units;
    s->pending_units += it->units;
    s->enq_seq++;
    s->stats.queued += it->units;
    uint64_t half = s->cfg.queue_limit / 2;
    if (s->has_writer && (before == 0 || (before < half &&
                                          s->pending_units >= half)))
        pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
}

/* Whether the rank totals are due in this batch: told to (FORCE, a run's
 * end in it, no writer thread: every drain is a flush), or
 * cfg.totals_interval_ms (0: every batch) since they were last written. */
static int totals_due(ss_store *s, const item *batch, int force)
{
    if (force || !s->has_writer)
        return 1;
    for (const item *it = batch; it; it = it->next)
        if (it->kind == IT_END_RUN)
            return 1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ms = (int64_t)(now.tv_sec - s->totals_at.tv_sec) * 1000 +
                 (now.tv_nsec - s->totals_at.tv_nsec) / 1000000;
    return ms >= (int64_t)s->cfg.totals_interval_ms;
}

/* Applies the items of BATCH (without its steps when SMALL_ONLY) in one
 * transaction, then the rank totals (with TOTALS) and pruning (not when
 * SMALL_ONLY).  Returns 0 when committed; -1 after rolling back (dbmu
 * held). */
static int run_batch(ss_store *s, const item *batch, int small_only,
                     int totals)
{
    int rc = ss__store_run(s, s->st[SS__ST_BEGIN], "starting a transaction");
    for (const item *it = batch; it && rc == 0; it = it->next)
        if (!small_only || !ss__item_is_bulk(it->kind))
            rc = ss__store_apply(s, it);
    if (rc == 0 && !small_only)
        rc = ss__retention_finish(s, totals);
    if (rc == 0)
        rc = ss__store_run(s, s->st[SS__ST_COMMIT], "committing");
    if (rc != 0) {
        if (!sqlite3_get_autocommit(s->db))
            ss__store_run(s, s->st[SS__ST_ROLLBACK], "rolling back");
        ss__tracks_forget_batch(s);
        return rc;
    }
    if (!small_only) {
        if (totals)
            clock_gettime(CLOCK_MONOTONIC, &s->totals_at);
        s->owed_after = ss__tracks_committed(s);
    }
    return rc;
}

static int64_t monotonic_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* What was lost and not said since the last words of a failing store. */
static void say_unsaid(ss_store *s, const char *how)
{
    if (s->unsaid_batches)
        fprintf(stderr, "stepscope: store %s: %s%" PRIu64 " more batch%s (%"
                PRIu64 " items) not written since the last report\n",
                s->path, how, s->unsaid_batches,
                s->unsaid_batches == 1 ? "" : "es", s->unsaid_items);
    s->unsaid_batches = s->unsaid_items = 0;
}

/* Applies BATCH in one transaction and frees it.  On a failure the
 * transaction is rolled back and the batch is lost (reported on stderr):
 * a store that cannot be written must not grow the queue without bound.
 * Its small items then get one more try of their own.  A store that keeps
 * failing is reported at its first failure and then at most every
 * SS__STORE_SAY_EVERY_MS, with the batches lost between (the run's summary
 * counts them all), and once more when it writes again. */
static void apply_batch(ss_store *s, item *batch, int force_totals)
{
    pthread_mutex_lock(&s->dbmu);
    s->batch_err[0] = '\0';
    int64_t now_ms = monotonic_ms();
    s->quiet = s->failing && now_ms - s->said_ms < SS__STORE_SAY_EVERY_MS;
    size_t n = 0, n_small = 0;
    for (const item *it = batch; it; it = it->next, n++)
        n_small += !ss__item_is_bulk(it->kind);
    int rc = run_batch(s, batch, 0, totals_due(s, batch, force_totals));
    int small_rc = -1;
    if (rc != 0 && s->quiet) {
        s->unsaid_batches++;
        s->unsaid_items += n;
        if (n_small > 0 && n_small < n)
            small_rc = run_batch(s, batch, 1, 0);
    } else if (rc != 0 && n == 0) {
        fprintf(stderr, "stepscope: store %s: the ranks' totals were not "
                "written (they stay owed)\n", s->path);
    } else if (rc != 0) {
        fprintf(stderr, "stepscope: store %s: a batch of %zu items was "
                "not written\n", s->path, n);
        say_unsaid(s, "and ");
        if (n_small > 0 && n_small < n) {
            small_rc = run_batch(s, batch, 1, 0);
            if (small_rc == 0)
                fprintf(stderr, "stepscope: store %s: its %zu other item%s "
                        "(ranks, findings, events) were written without its "
                        "steps\n", s->path, n_small, n_small == 1 ? "" : "s");
        }
    }
    if (rc != 0 && !s->quiet) {
        if (!s->failing)
            fprintf(stderr, "stepscope: store %s: while it keeps failing, "
                    "this is said again every %d s\n", s->path,
                    SS__STORE_SAY_EVERY_MS / 1000);
        s->said_ms = now_ms;
    }
    if (rc == 0 && s->failing) {
        say_unsaid(s, "");
        fprintf(stderr, "stepscope: store %s: written again\n", s->path);
    }
    s->failing = rc != 0;
    s->quiet = 0;
    ss_store_outcome d;
    memset(&d, 0, sizeof d);
    for (const item *it = batch; it; it = it->next)
        ss__outcome_tally(s, it, rc == 0 || (small_rc == 0 && !ss__item_is_bulk(it->kind)),
                   &d);
    char why[sizeof s->batch_err];
    snprintf(why, sizeof why, "%s",
             s->batch_err[0] ? s->batch_err : "out of memory while writing");
    pthread_mutex_unlock(&s->dbmu);
    pthread_mutex_lock(&s->mu);
    ss__outcome_add(s, &d, why);
    pthread_mutex_unlock(&s->mu);
    while (batch) {
        item *next = batch->next;
        free(batch);
        batch = next;
    }
}

void ss__store_drain_locked(ss_store *s)
{
    item *batch = s->head;
    uint64_t units = s->pending_units, seq = s->enq_seq;
    int force = s->flush_wanted || s->stop || s->totals_wanted;
    s->head = s->tail = NULL;
    s->pending_units = 0;
    s->pending_value_bytes = 0;
    s->flush_wanted = 0;
    pthread_mutex_unlock(&s->mu);
    if (batch || force)
        apply_batch(s, batch, force);
    pthread_mutex_lock(&s->mu);
    s->totals_owed = s->owed_after;
    s->totals_wanted = 0;
    s->stats.written += units;
    if (batch)
        s->stats.transactions++;
    if (seq > s->done_seq)
        s->done_seq = seq;
    pthread_cond_broadcast(&s->done);
}

static int ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec ||
           (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

void *ss__store_writer_main(void *arg)
{
    ss_store *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stop && !s->head && !s->totals_wanted)
            pthread_cond_wait(&s->wake, &s->mu);
        if (s->head && !s->stop && !s->flush_wanted &&
            s->pending_units < s->cfg.queue_limit / 2) {
            struct timespec due = s->first_at, now;
            due.tv_sec += s->cfg.flush_interval_ms / 1000;
            due.tv_nsec += (long)(s->cfg.flush_interval_ms % 1000) * 1000000;
            if (due.tv_nsec >= 1000000000) {
                due.tv_sec++;
                due.tv_nsec -= 1000000000;
            }
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (ts_before(&now, &due)) {
                pthread_cond_timedwait(&s->wake, &s->mu, &due);
                continue; /* re-evaluate: woken early or due */
            }
        }
        if (s->head || s->totals_wanted) {
            ss__store_drain_locked(s);
        } else if (s->stop) {
            if (s->totals_owed) /* one try, broken disk or not */
                ss__store_drain_locked(s);
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&s->dbmu);
    say_unsaid(s, "at the end, ");
    pthread_mutex_unlock(&s->dbmu);
    return NULL;
}
