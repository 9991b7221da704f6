/*
 * hang.c - hang detection (hang.h): the timeout, the stall clock and the
 * diagnosis of which ranks are behind.
 *
 * Who is behind, in order of the evidence's strength:
 *   1. ranks whose STATUS stopped coming (silent_after): stopped, frozen
 *      or dead without their socket closing: nobody else can explain them;
 *   2. ranks at a lower collective number than the others: the others
 *      entered a collective these ranks have not reached (or never will:
 *      one skipped); at the same number, ranks whose collective is of
 *      another kind than most ranks' (a barrier where the others
 *      all-reduce), then ranks outside the collective the others are in;
 *   3. ranks that completed fewer steps than the others;
 *   4. ranks in another phase than most ranks.
 * The first rule that separates the ranks names them; when none does,
 * every rank is in the same state (all wait: a fault outside the ranks)
 * and the finding says so, naming no rank.  A job of one live rank names
 * that rank.  The message then describes every group of ranks in the
 * same state, the ones behind first.
 */
#include "hang.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fnv1a.h"
#include "json.h"

#define NS_PER_S 1000000000LL

void ss_hang_config_defaults(ss_hang_config *cfg)
{
    cfg->timeout = 0;
    cfg->floor = 30 * NS_PER_S;
    cfg->factor = 10.0;
    cfg->startup = 600 * NS_PER_S;
    cfg->silent_after = 5 * NS_PER_S;
}

void ss_hang_init(ss_hang *h, const ss_hang_config *cfg, ss_mono_ns now)
{
    memset(h, 0, sizeof *h);
    h->cfg = *cfg;
    h->progress_at = now;
    h->watermark = -1;
}

void ss_hang_set_wall_offset(ss_hang *h, ss_wall_ns offset)
{
    h->wall_offset = offset;
}

void ss_hang_progress(ss_hang *h, uint64_t step, ss_dur_ns step_time,
                      ss_mono_ns now)
{
    h->progress_at = now;
    h->fired = 0;
    h->watermark = step > INT64_MAX ? INT64_MAX : (int64_t)step;
    if (step_time == SS_MISSING || step_time < 0)
        return;
    h->times[h->next_time] = step_time;
    h->next_time = (h->next_time + 1) % SS_HANG_HISTORY;
    if (h->n_times < SS_HANG_HISTORY)
        h->n_times++;
}

static int cmp_dur(const void *a, const void *b)
{
    ss_dur_ns x = *(const ss_dur_ns *)a, y = *(const ss_dur_ns *)b;
    return (x > y) - (x < y);
}

ss_dur_ns ss_hang_timeout(const ss_hang *h)
{
    const ss_hang_config *c = &h->cfg;
    if (h->watermark < 0 && !(h->working && c->timeout > 0))
        return c->timeout > c->startup ? c->timeout : c->startup;
    if (c->timeout > 0)
        return c->timeout;
    ss_dur_ns t = c->floor;
    if (h->n_times > 0) {
        ss_dur_ns sorted[SS_HANG_HISTORY];
        memcpy(sorted, h->times, h->n_times * sizeof sorted[0]);
        qsort(sorted, h->n_times, sizeof sorted[0], cmp_dur);
        /* nearest rank: the smallest value with >= 99 % at or below it */
        uint32_t k = (uint32_t)((99 * (uint64_t)h->n_times + 99) / 100);
        double p99 = (double)sorted[k - 1];
        if (c->factor * p99 > (double)t)
            t = (ss_dur_ns)(c->factor * p99);
    }
    return t;
}

/* ---- the diagnosis ---- */

typedef struct {
    const ss_hang_rank *r;
    int silent;
    double silent_s;
    int behind;
    int group; /* index of the first rank in the same state */
} rank_view;

/* The state of V without a verb: "in phase 'x' of step 3 (after
 * all_reduce #7)", "waiting in all_reduce #8 of step 3", ... */
static void state_phrase(ss_buf *b, const ss_hang_rank *r)
{
    char where[48];
    if (r->cur_step >= 0)
        snprintf(where, sizeof where, " of step %lld",
                 (long long)r->cur_step);
    else
        snprintf(where, sizeof where, " between steps");
    if (r->coll_seq && r->coll_active) {
        ss_buf_printf(b, "waiting in %s #%llu%s", r->collective,
                      (unsigned long long)r->coll_seq, where);
        return;
    }
    if (r->phase[0])
        ss_buf_printf(b, "in phase '%s'%s", r->phase, where);
    else if (r->cur_step >= 0)
        ss_buf_printf(b, "in step %lld outside any phase",
                      (long long)r->cur_step);
    else if (r->last_step >= 0)
        ss_buf_printf(b, "between steps after step %lld",
                      (long long)r->last_step);
    else
        ss_buf_puts(b, "before its first step");
    if (r->coll_seq)
        ss_buf_printf(b, " (after %s #%llu)", r->collective,
                      (unsigned long long)r->coll_seq);
}

/* For silent rank R, whose last report (at most a STATUS interval before
 * its silence) may be behind where it stopped: says when the ranks still
 * reporting wait in a collective numbered two or more past R's, which they
 * could begin only after R took part in the one before. */
static void passed_since(ss_buf *b, const rank_view *v, uint32_t n,
                         const ss_hang_rank *r)
{
    const ss_hang_rank *ahead = NULL;
    for (uint32_t i = 0; i < n; i++)
        if (v[i].r->live && !v[i].silent && v[i].r->coll_active &&
            (!ahead || v[i].r->coll_seq > ahead->coll_seq))
            ahead = v[i].r;
    if (!ahead || ahead->coll_seq < r->coll_seq + 2)
        return;
    ss_buf_printf(b, ", a report from before it stopped: the others wait in "
                  "%s #%llu, which they began only after it had taken part "
                  "in #%llu", ahead->collective,
                  (unsigned long long)ahead->coll_seq,
                  (unsigned long long)(ahead->coll_seq - 1));
}

/* Two ranks are in the same state when their phrases and silence match. */
static int same_state(const rank_view *a, const rank_view *b)
{
    if (a->silent != b->silent || a->behind != b->behind)
        return 0;
    ss_buf x = {0}, y = {0};
    state_phrase(&x, a->r);
    state_phrase(&y, b->r);
    int same = x.data && y.data && strcmp(x.data, y.data) == 0;
    ss_buf_free(&x);
    ss_buf_free(&y);
    return same;
}

/* "rank 2", "ranks 0,1,3", "ranks 0–2,5": the ranks of group G. */
static void rank_list(ss_buf *b, const rank_view *v, uint32_t n, int g)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; i++)
        count += v[i].group == g;
    ss_buf_puts(b, count == 1 ? "rank " : "ranks ");
    int first = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (v[i].group != g)
            continue;
        uint32_t j = i;
        while (j + 1 < n && v[j + 1].group == g)
            j++;
        if (!first)
            ss_buf_puts(b, ",");
        first = 0;
        if (j >= i + 2) {
            ss_buf_printf(b, "%u\xe2\x80\x93%u", i, j); /* en dash */
            i = j;
        } else {
            ss_buf_printf(b, "%u", i);
        }
    }
}

/* Marks as behind the live, not yet silent ranks that PRED picks out. */
static int mark(rank_view *v, uint32_t n, int (*pred)(const rank_view *,
                                                        const void *),
                const void *arg)
{
    int any = 0;
    for (uint32_t i = 0; i < n; i++)
        if (v[i].r->live && pred(&v[i], arg)) {
            v[i].behind = 1;
            any = 1;
        }
    return any;
}

static int seq_below(const rank_view *x, const void *arg)
{
    return x->r->coll_seq < *(const uint64_t *)arg;
}

static int kind_differs(const rank_view *x, const void *arg)
{
    return strcmp(x->r->collective, (const char *)arg) != 0;
}

static int not_in_collective(const rank_view *x, const void *arg)
{
    (void)arg;
    return !x->r->coll_active;
}

static int steps_below(const rank_view *x, const void *arg)
{
    return x->r->last_step < *(const int64_t *)arg;
}

static int phase_differs(const rank_view *x, const void *arg)
{
    return strcmp(x->r->phase, (const char *)arg) != 0;
}

/* The most common value of FIELD among the live ranks (ties: the first). */
static const char *majority(const rank_view *v, uint32_t n, int collective)
{
    const char *best = NULL;
    uint32_t best_n = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!v[i].r->live)
            continue;
        const char *s = collective ? v[i].r->collective : v[i].r->phase;
        uint32_t c = 0;
        for (uint32_t j = 0; j < n; j++)
            c += v[j].r->live &&
                 strcmp(collective ? v[j].r->collective : v[j].r->phase,
                        s) == 0;
        if (c > best_n) {
            best = s;
            best_n = c;
        }
    }
    return best ? best : "";
}

/* Applies the rules of the file comment to V.  Returns 1 when the live
 * ranks are not all at the same collective (number and kind). */
static int diagnose(rank_view *v, uint32_t n)
{
    uint64_t max_seq = 0, min_seq = UINT64_MAX;
    int64_t max_step = -1;
    int any_silent = 0, any_active = 0, any_idle = 0, kinds_differ = 0;
    const char *kind0 = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const ss_hang_rank *r = v[i].r;
        if (!r->live)
            continue;
        any_silent |= v[i].silent;
        if (r->coll_seq > max_seq)
            max_seq = r->coll_seq;
        if (r->coll_seq < min_seq)
            min_seq = r->coll_seq;
        if (r->last_step > max_step)
            max_step = r->last_step;
        any_active |= r->coll_active;
        any_idle |= !r->coll_active;
        if (!kind0)
            kind0 = r->collective;
        else if (strcmp(kind0, r->collective) != 0)
            kinds_differ = 1;
    }
    int mismatch = max_seq > 0 && (min_seq != max_seq || kinds_differ);
    if (any_silent) {
        /* a silent rank's last report predates its silence: where it
         * stands says nothing of a mismatch; the others' do */
        uint64_t lo = UINT64_MAX, hi = 0;
        const char *kind = NULL;
        int differ = 0;
        for (uint32_t i = 0; i < n; i++) {
            const ss_hang_rank *r = v[i].r;
            if (!r->live || v[i].silent)
                continue;
            lo = r->coll_seq < lo ? r->coll_seq : lo;
            hi = r->coll_seq > hi ? r->coll_seq : hi;
            differ |= kind && strcmp(kind, r->collective) != 0;
            kind = kind ? kind : r->collective;
        }
        mismatch = hi > 0 && (lo != hi || differ);
    }
    uint32_t live = 0;
    for (uint32_t i = 0; i < n; i++)
        live += v[i].r->live;
    if (live == 1) {
        /* a job of one live rank: whatever holds it, it is that rank */
        for (uint32_t i = 0; i < n; i++)
            v[i].behind = v[i].r->live;
        return 0;
    }
    if (any_silent) {
        for (uint32_t i = 0; i < n; i++)
            v[i].behind = v[i].r->live && v[i].silent;
        return mismatch;
    }
    if (max_seq > 0) {
        if (min_seq < max_seq && mark(v, n, seq_below, &max_seq))
            return mismatch;
        if (kinds_differ &&
            mark(v, n, kind_differs, majority(v, n, 1)))
            return mismatch;
        if (any_active && any_idle && mark(v, n, not_in_collective, NULL))
            return mismatch;
    }
    if (mark(v, n, steps_below, &max_step))
        return mismatch;
    mark(v, n, phase_differs, majority(v, n, 0));
    return mismatch;
}

/* FNV-1a over what the ranks show before the first step; *WORKING set
 * when some rank shows work. */
static uint64_t shown(const ss_hang_rank *ranks, uint32_t n, int *working)
{
    uint64_t x = SS_FNV1A_BASIS;
    static const unsigned char end_of_phase = 0xff;
    for (uint32_t i = 0; i < n; i++) {
        const ss_hang_rank *r = &ranks[i];
        int64_t nums[4] = {r->live, r->cur_step, (int64_t)r->coll_seq,
                           r->coll_active};
        x = ss_fnv1a(x, nums, sizeof nums);
        x = ss_fnv1a(x, r->phase, strlen(r->phase));
        x = ss_fnv1a(x, &end_of_phase, 1);
        *working |= r->live && (r->cur_step >= 0 || r->phase[0] ||
                                r->coll_seq > 0);
    }
    return x;
}

void ss_hang_pause(ss_hang *h, ss_dur_ns gap, ss_mono_ns now)
{
    if (gap <= 0)
        return;
    h->progress_at = h->progress_at > now - gap ? now : h->progress_at + gap;
}

int ss_hang_check(ss_hang *h, ss_mono_ns now, const ss_hang_rank *ranks,
                  uint32_t n, ss_finding *out)
{
    if (h->watermark < 0) {
        int working = 0;
        uint64_t sig = shown(ranks, n, &working);
        if (working && (!h->working || sig != h->before_first)) {
            h->progress_at = now;
            h->fired = 0;
        }
        h->working |= working;
        h->before_first = sig;
    }
    ss_dur_ns timeout = ss_hang_timeout(h);
    ss_dur_ns stalled = now - h->progress_at;
    if (h->fired || stalled <= timeout)
        return 0;
    uint32_t live = 0;
    for (uint32_t i = 0; i < n; i++)
        live += ranks[i].live != 0;
    if (live == 0)
        return 0;
    rank_view *v = calloc(n, sizeof *v);
    if (!v)
        return 0; /* tried again on the next tick */
    h->fired = 1;
    /* A short timeout shortens the silence that counts (ranks report at
     * least once a second). */
    ss_dur_ns silent_after = h->cfg.silent_after < timeout
                                 ? h->cfg.silent_after : timeout;
    if (silent_after < 2 * NS_PER_S)
        silent_after = 2 * NS_PER_S;
    for (uint32_t i = 0; i < n; i++) {
        v[i].r = &ranks[i];
        v[i].silent = ranks[i].live && ranks[i].heard_at > 0 &&
                      now - ranks[i].heard_at > silent_after;
        v[i].silent_s = (double)(now - ranks[i].heard_at) / 1e9;
        v[i].group = -1;
    }
    int mismatch = diagnose(v, n);
    for (uint32_t i = 0; i < n; i++) {
        if (!ranks[i].live)
            continue;
        for (uint32_t j = 0; j < i && v[i].group < 0; j++)
            if (ranks[j].live && v[j].group == (int)j &&
                same_state(&v[i], &v[j]))
                v[i].group = (int)j;
        if (v[i].group < 0)
            v[i].group = (int)i;
    }

    memset(out, 0, sizeof *out);
    snprintf(out->kind, sizeof out->kind, "hang");
    out->severity = SS_CRITICAL;
    int64_t at = h->watermark + 1;
    out->first_step = out->last_step = (uint64_t)at;
    uint32_t n_behind = 0;
    for (uint32_t i = 0; i < n; i++)
        if (v[i].behind) {
            if (out->n_ranks < SS_FINDING_MAX_RANKS)
                out->ranks[out->n_ranks++] = (int32_t)i;
            if (n_behind++ == 0 && !v[i].silent && !ranks[i].coll_active)
                snprintf(out->phase, sizeof out->phase, "%s",
                         ranks[i].phase);
        }

    ss_buf msg = {0};
    ss_buf_printf(&msg, "no progress for %.0f s at %s%lld", stalled / 1e9,
                  h->watermark < 0 ? "the first step, " : "step ",
                  (long long)at);
    ss_buf_puts(&msg, mismatch ? " (the ranks are at different collectives)"
                               : "");
    ss_buf_puts(&msg, n_behind ? ": " : ": no rank is behind the others: ");
    int first = 1;
    for (int pass = 0; pass < 2; pass++) /* the ranks behind first */
        for (uint32_t i = 0; i < n; i++) {
            if (!ranks[i].live || v[i].group != (int)i ||
                v[i].behind != (pass == 0))
                continue;
            uint32_t members = 0;
            for (uint32_t j = i; j < n; j++)
                members += v[j].group == (int)i;
            ss_buf_puts(&msg, first ? "" : "; ");
            first = 0;
            rank_list(&msg, v, n, (int)i);
            ss_buf_puts(&msg, members == 1 ? " is " : " are ");
            if (v[i].silent && members == 1 && ranks[i].stopped_for > 0 &&
                ranks[i].stop_kind == SS_STOP_FREEZER)
                ss_buf_printf(&msg, "frozen for %.0f s (its cgroup's "
                              "freezer holds it: a paused container, or a "
                              "freeze from outside), last seen ",
                              ranks[i].stopped_for / 1e9);
            else if (v[i].silent && members == 1 && ranks[i].stopped_for > 0)
                ss_buf_printf(&msg, "stopped for %.0f s (its process is in "
                              "state T: %s), last seen ",
                              ranks[i].stopped_for / 1e9,
                              ranks[i].stop_kind == SS_STOP_TRACER
                                  ? "a debugger or tracer holds it"
                                  : "SIGSTOP or a job control stop");
            else if (v[i].silent)
                ss_buf_printf(&msg, "silent for %.0f s (stopped or frozen), "
                              "last seen ", v[i].silent_s);
            state_phrase(&msg, &ranks[i]);
            if (v[i].silent)
                passed_since(&msg, v, n, &ranks[i]);
        }
    snprintf(out->message, sizeof out->message, "%s",
             msg.data ? msg.data : "no progress");
    ss_buf_free(&msg);

    /* Evidence: the numbers, then one item per live rank while they fit
     * (an item that does not fit is left out whole). */
    ss_buf ev = {0};
    ss_buf_printf(&ev, "{\"stalled_s\":%.1f,\"timeout_s\":%.1f,"
                  "\"watermark\":%lld,\"collective_mismatch\":%s,",
                  stalled / 1e9, timeout / 1e9, (long long)h->watermark,
                  mismatch ? "true" : "false");
    if (h->wall_offset)
        ss_buf_printf(&ev, "\"last_progress_at\":%lld,",
                      (long long)(h->progress_at + h->wall_offset));
    ss_buf_puts(&ev, "\"ranks\":[");
    int items = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!ranks[i].live)
            continue;
        size_t mark_len = ev.len;
        ss_buf_printf(&ev, "%s{\"rank\":%u,\"behind\":%s,\"silent\":%s,"
                      "\"last_step\":%lld,\"step\":%lld,\"phase\":",
                      items ? "," : "", i, v[i].behind ? "true" : "false",
                      v[i].silent ? "true" : "false",
                      (long long)ranks[i].last_step,
                      (long long)ranks[i].cur_step);
        ss_buf_json_str(&ev, ranks[i].phase);
        ss_buf_puts(&ev, ",\"collective\":");
        ss_buf_json_str(&ev, ranks[i].collective);
        ss_buf_printf(&ev, ",\"seq\":%llu,\"in_collective\":%s}",
                      (unsigned long long)ranks[i].coll_seq,
                      ranks[i].coll_active ? "true" : "false");
        if (ev.len + 2 >= sizeof out->evidence_json) {
            ev.len = mark_len; /* did not fit: the rest are left out */
            break;
        }
        items++;
    }
    ss_buf_puts(&ev, "]}");
    if (!ev.oom && ev.data && ev.len < sizeof out->evidence_json)
        memcpy(out->evidence_json, ev.data, ev.len + 1);
    else
        snprintf(out->evidence_json, sizeof out->evidence_json, "{}");
    ss_buf_free(&ev);
    free(v);
    return 1;
}
