/*
 * guard_judge.c - the judgement behind `stepscope guard` and the history
 * document of the HTTP API (docs/guard.md, docs/api.md): the choice of
 * comparable baseline runs, the comparison of every metric, and each
 * metric's history with its change points.
 *
 * A metric regresses when all of these hold (the defaults are in
 * guard_settings_defaults, metric_defaults and docs/guard.md):
 *  - the rank-sum test of the run's samples against the pooled samples of
 *    the baseline runs has p < alpha;
 *  - the Hodges-Lehmann shift, relative to the baseline's median, is worse
 *    than the metric's threshold, and its confidence interval lies wholly
 *    on the worse side of 0;
 *  - the shift is larger than the run-level prediction bound of the
 *    baseline runs' medians (run_level_bound): steps within one run are
 *    not independent, so a shift the baseline runs show among themselves
 *    is noise, however small its p;
 *  - the latest baseline runs that are themselves that much worse (a
 *    regression that began before this run) are left out of the baseline,
 *    down to min_runs runs;
 *  - the shift is larger than the metric's smallest absolute change.
 * Since which run: the first of the consecutive runs ending with this one
 * whose medians are all that much worse, and nearer this run's level than
 * the baseline's.  Where the level of a metric
 * moved, in either direction: E-divisive change points over the
 * comparable history's per-run medians, listed alongside.
 *
 * It lives in the API stage so that both the command (views/guard.c) and
 * the HTTP API (query.c) use this one judgement.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "guard_model.h"
#include "json.h"
#include "numparse.h"
#include "stats.h"

#define GUARD_SEED 0x67756172645eedull
#define GUARD_MAX_CHANGES 8
#define GUARD_MAX_LISTED 10 /* runs named in "left out" before "and N more" */
#define GUARD_BASELINE_MAX 10000 /* ids in --baseline, as --last allows */

void guard_settings_defaults(guard_settings *s)
{
    memset(s, 0, sizeof *s);
    s->alpha = 0.001;
    s->run_alpha = 0.005;
    s->confidence = 0.95;
    s->warmup = 10;
    s->min_runs = 3;
    s->last = 10;
    s->history = 50;
    s->block = 10;
    s->consecutive = 1;
}

/* The default relative threshold and smallest absolute shift of METRIC. */
static void metric_defaults(const char *metric, double *threshold,
                            double *min_abs)
{
    *min_abs = 0.0;
    if (strncmp(metric, "phase.", 6) == 0) {
        *threshold = 0.10;
        *min_abs = 0.05; /* ms */
    } else if (strncmp(metric, "skew.", 5) == 0) {
        *threshold = 0.50;
        *min_abs = 0.1; /* ms */
    } else if (strcmp(metric, "step_time_p90") == 0) {
        *threshold = 0.10; /* a tail moves more than the median */
    } else if (strcmp(metric, "rss_peak") == 0 ||
               strcmp(metric, "device_peak") == 0) {
        *threshold = 0.10;
        *min_abs = 1.0; /* MiB */
    } else {
        *threshold = 0.05; /* step times, throughput, user metrics */
    }
}

/* The threshold of METRIC after --set: threshold.METRIC, then the longest
 * matching threshold.PREFIX., then threshold, then the default. */
static double metric_threshold(const guard_settings *s, const char *metric)
{
    double threshold, min_abs;
    metric_defaults(metric, &threshold, &min_abs);
    size_t best = 0;
    int exact = 0;
    for (size_t i = 0; i < s->n_thresholds; i++) {
        const char *eq = strchr(s->thresholds[i], '=');
        size_t klen = (size_t)(eq - s->thresholds[i]);
        double v = atof(eq + 1) / 100.0;
        const char *key = s->thresholds[i];
        if (klen == 0) {
            if (best == 0 && !exact)
                threshold = v;
        } else if (strlen(metric) == klen && strncmp(key, metric, klen) == 0) {
            threshold = v;
            exact = 1;
        } else if (!exact && key[klen - 1] == '.' && klen > best &&
                   strncmp(key, metric, klen) == 0) {
            threshold = v;
            best = klen;
        }
    }
    return threshold;
}

/* ---- comparable runs ---- */

/* The fingerprint keys that must match besides the world size (compared
 * from the runs table, so runs without a fingerprint have it too); "host",
 * "kernel" and "cpus" are recorded but not compared (docs/guard.md). */
static const char *const compared_keys[] = {
    "command", "nodes", "cpu", "gpu", "gpu_driver",
    "python", "torch", "stepscope", "env",
};

/* Appends to DIFF (may be NULL) what differs between runs A and B; returns
 * how many keys differ. */
static int fingerprint_diff(const guard_run *a, const guard_run *b,
                            ss_buf *diff)
{
    int n = 0;
    if (a->row.world_size != b->row.world_size) {
        if (diff)
            ss_buf_printf(diff, "%sworld_size %lld vs %lld",
                          diff->len ? ", " : "",
                          (long long)a->row.world_size,
                          (long long)b->row.world_size);
        n++;
    }
    cJSON *ja = a->fingerprint ? cJSON_Parse(a->fingerprint) : NULL;
    cJSON *jb = b->fingerprint ? cJSON_Parse(b->fingerprint) : NULL;
    if (!ja || !jb) {
        /* Runs recorded before fingerprints: the command must match. */
        if (strcmp(a->row.command ? a->row.command : "",
                   b->row.command ? b->row.command : "") != 0) {
            if (diff)
                ss_buf_printf(diff, "%scommand differs", diff->len ? ", " : "");
            n++;
        }
        if ((ja != NULL) != (jb != NULL)) {
            if (diff)
                ss_buf_printf(diff, "%sfingerprint recorded for one only",
                              diff->len ? ", " : "");
            n++;
        }
    } else {
        for (size_t i = 0; i < sizeof compared_keys / sizeof *compared_keys;
             i++) {
            const char *k = compared_keys[i];
            cJSON *va = cJSON_GetObjectItemCaseSensitive(ja, k);
            cJSON *vb = cJSON_GetObjectItemCaseSensitive(jb, k);
            if (!va && !vb)
                continue;
            if (va && vb && cJSON_Compare(va, vb, 1))
                continue;
            n++;
            if (!diff)
                continue;
            if (cJSON_IsString(va) && cJSON_IsString(vb) &&
                strcmp(k, "command") != 0)
                ss_buf_printf(diff, "%s%s %s vs %s", diff->len ? ", " : "", k,
                              va->valuestring, vb->valuestring);
            else
                ss_buf_printf(diff, "%s%s differs", diff->len ? ", " : "", k);
        }
    }
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    return n;
}

/* Parses the run id LEN bytes at P (digits only, >= 1) into *ID. */
static int parse_run_id(const char *p, size_t len, int64_t *id)
{
    char one[24];
    if (len == 0 || len >= sizeof one)
        return -1;
    memcpy(one, p, len);
    one[len] = '\0';
    return one[0] == '-' ? -1 : ss_parse_i64(one, 1, INT64_MAX, id);
}

/*
 * Parses "3,5,7-9" into *IDS (the caller frees): comma-separated ids and
 * ranges of ids, digits only (no space, no '+'), at most
 * GUARD_BASELINE_MAX ids in all, counted before anything is allocated.
 * Returns 0, or -1 with a message naming what is wrong.
 */
static int parse_run_list(const char *s, int64_t **ids, size_t *n, char *err,
                          size_t errlen)
{
    *ids = NULL;
    *n = 0;
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        const char *p = s;
        do {
            size_t len = strcspn(p, ",");
            const char *dash = memchr(p, '-', len);
            int64_t a, b;
            if (dash ? parse_run_id(p, (size_t)(dash - p), &a) != 0 ||
                           parse_run_id(dash + 1, len - (size_t)(dash - p) - 1,
                                        &b) != 0 || b < a
                     : parse_run_id(p, len, &a) != 0) {
                snprintf(err, errlen, "--baseline: expected run ids like "
                         "3,5,7-9, got '%.*s' in '%s'", (int)len, p, s);
                free(*ids);
                *ids = NULL;
                *n = 0;
                return -1;
            }
            if (!dash)
                b = a;
            if (pass == 0) {
                if ((uint64_t)(b - a) >= GUARD_BASELINE_MAX - total) {
                    snprintf(err, errlen, "--baseline: at most %d runs, "
                             "'%s' names more", GUARD_BASELINE_MAX, s);
                    return -1;
                }
                total += (size_t)(b - a) + 1;
            } else {
                for (int64_t v = a;; v++) {
                    (*ids)[(*n)++] = v;
                    if (v == b)
                        break;
                }
            }
            p += len;
        } while (*p++ == ',');
        if (pass == 0 && !(*ids = malloc(total * sizeof **ids))) {
            snprintf(err, errlen, "--baseline: out of memory");
            return -1;
        }
    }
    return 0;
}

/* ---- the comparison ---- */

int guard_wanted_metric(const char *name, char **want, size_t n_want)
{
    if (n_want == 0)
        return 1;
    for (size_t i = 0; i < n_want; i++) {
        size_t len = strlen(want[i]);
        if (strcmp(want[i], name) == 0 ||
            (len && want[i][len - 1] == '.' && strncmp(want[i], name, len) == 0))
            return 1;
    }
    return 0;
}

/*
 * How far a new run's median may lie from the baseline runs' mean before
 * the run level alone calls it a change: the one-sided prediction bound
 * t(run_alpha, k - 1) * sd * sqrt(1 + 1/k) over the medians VALS[0..K) of
 * the baseline runs (VALS is reordered).  Steps within a run share its
 * machine, its load and its calibration, so their spread understates how
 * much two runs differ; this bound is what makes the per-step test hold
 * across runs.  From 5 runs on, the run furthest from the mean is left out
 * first (one noisy run must not blind the guard).  INFINITY with fewer
 * than 2 runs.
 */
static double run_level_bound(double *vals, size_t k, const guard_settings *st)
{
    if (k < 2)
        return INFINITY;
    double mean = 0.0;
    for (size_t i = 0; i < k; i++)
        mean += vals[i] / (double)k;
    if (k >= 5) {
        size_t far = 0;
        for (size_t i = 1; i < k; i++)
            if (fabs(vals[i] - mean) > fabs(vals[far] - mean))
                far = i;
        vals[far] = vals[--k];
        mean = 0.0;
        for (size_t i = 0; i < k; i++)
            mean += vals[i] / (double)k;
    }
    double ss = 0.0;
    for (size_t i = 0; i < k; i++)
        ss += (vals[i] - mean) * (vals[i] - mean);
    double t = ss_student_t_quantile(2.0 * st->run_alpha, (double)(k - 1));
    return t * sqrt(ss / (double)(k - 1)) * sqrt(1.0 + 1.0 / (double)k);
}

/* How much worse VALUE is than CENTRE, relative to CENTRE, for metrics
 * where DIR is worse (either way: the absolute change). */
static double worse_by(guard_direction dir, double value, double centre)
{
    double rel = (value - centre) / fabs(centre);
    return dir == GUARD_HIGHER_IS_WORSE  ? rel
           : dir == GUARD_LOWER_IS_WORSE ? -rel
                                         : fabs(rel);
}

/* Fills R for metric S of the candidate against the BASE runs and the
 * history (HIST_IDS / HIST_VALUES filled by the caller); 0 or -1 (memory). */
static int compare_metric(guard_result *r, const guard_series *s,
                          const guard_run *base, size_t n_base,
                          const guard_settings *st)
{
    memset(&r->t, 0, sizeof r->t);
    r->run = s;
    r->verdict = GUARD_NO_DATA;
    r->rel = r->rel_lo = r->rel_hi = r->baseline = r->spread = NAN;
    metric_defaults(s->name, &r->threshold, &r->min_abs);
    r->threshold = metric_threshold(st, s->name);
    if (!s->tested) {
        double sum = 0;
        for (size_t i = 0; i < n_base; i++) {
            const guard_series *b = guard_find_series(&base[i], s->name);
            sum += b ? b->value : 0.0;
        }
        r->baseline = n_base ? sum / (double)n_base : NAN;
        r->verdict = GUARD_SHOWN;
        return 0;
    }
    /* The baseline runs with this metric, oldest first. */
    const guard_series *runs[n_base ? n_base : 1];
    double vals[n_base ? n_base : 1];
    size_t n_runs = 0;
    for (size_t i = 0; i < n_base; i++) {
        const guard_series *b = guard_find_series(&base[i], s->name);
        if (b && b->n && isfinite(b->value)) {
            vals[n_runs] = b->value;
            runs[n_runs++] = b;
        }
    }
    if (n_runs == 0 || s->n == 0)
        return 0;
    /* A regression that began before this run: the latest baseline runs,
     * each worse than the baseline runs' median by more than the
     * threshold, are left out (down to min_runs runs), so that the run is
     * judged against the level before it and not against a mixture. */
    double centre = ss_median_f64(vals, n_runs);
    size_t keep = n_runs;
    while (keep > st->min_runs &&
           worse_by(s->direction, runs[keep - 1]->value, centre) > r->threshold)
        keep--;
    r->runs_left_out = n_runs - keep;
    size_t total = 0;
    for (size_t i = 0; i < keep; i++)
        total += runs[i]->n;
    r->n_baseline = total;
    double *pool = malloc(total * sizeof *pool);
    if (!pool)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < keep; i++) {
        memcpy(pool + k, runs[i]->v, runs[i]->n * sizeof *pool);
        k += runs[i]->n;
        vals[i] = runs[i]->value;
    }
    if (ss_shift_test_run(pool, total, s->v, s->n, st->confidence, GUARD_SEED,
                          &r->t) != 0) {
        free(pool);
        return -1;
    }
    r->baseline = ss_median_f64(pool, total);
    free(pool);
    double scale = fabs(r->baseline);
    if (!(scale > 0)) {
        r->verdict = GUARD_SAME;
        r->rel = r->rel_lo = r->rel_hi = 0;
        return 0;
    }
    r->rel = r->t.shift / scale;
    r->rel_lo = r->t.lo / scale;
    r->rel_hi = r->t.hi / scale;
    r->spread = run_level_bound(vals, keep, st) / scale;
    int significant = r->t.p < st->alpha && fabs(r->t.shift) >= r->min_abs;
    double up = r->rel, down = -r->rel;
    int up_bad = significant && r->rel_lo > 0 && up > r->threshold &&
                 up > r->spread;
    int down_bad = significant && r->rel_hi < 0 && down > r->threshold &&
                   down > r->spread;
    r->verdict = GUARD_SAME;
    switch (s->direction) {
    case GUARD_HIGHER_IS_WORSE:
        r->verdict = up_bad ? GUARD_REGRESSED : down_bad ? GUARD_IMPROVED
                                                         : GUARD_SAME;
        break;
    case GUARD_LOWER_IS_WORSE:
        r->verdict = down_bad ? GUARD_REGRESSED : up_bad ? GUARD_IMPROVED
                                                         : GUARD_SAME;
        break;
    case GUARD_EITHER_IS_WORSE:
        r->verdict = up_bad || down_bad ? GUARD_REGRESSED : GUARD_SAME;
        break;
    }
    return 0;
}

int guard_history_of(guard_result *r, const char *name,
                     const guard_run *const *hist, size_t n_hist,
                     const guard_run *cand, const guard_settings *st)
{
    r->history_runs = malloc((n_hist + 1) * sizeof *r->history_runs);
    r->history_values = malloc((n_hist + 1) * sizeof *r->history_values);
    r->change_runs = malloc(GUARD_MAX_CHANGES * sizeof *r->change_runs);
    if (!r->history_runs || !r->history_values || !r->change_runs)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i <= n_hist; i++) {
        const guard_run *run = i < n_hist ? hist[i] : cand;
        const guard_series *s = guard_find_series(run, name);
        if (!s || !isfinite(s->value))
            continue;
        r->history_runs[n] = run->row.id;
        r->history_values[n++] = s->value;
    }
    r->n_history = n;
    ss_edivisive_config cfg;
    ss_edivisive_defaults(&cfg);
    size_t points[GUARD_MAX_CHANGES];
    int found = ss_edivisive(r->history_values, n, &cfg, points,
                             GUARD_MAX_CHANGES);
    if (found < 0)
        return -1;
    for (int i = 0; i < found; i++)
        r->change_runs[r->n_change++] = r->history_runs[points[i]];
    if (r->verdict != GUARD_REGRESSED)
        return 0;
    /* Since: the first of the runs, ending with this one, whose medians
     * are all worse than the baseline by more than the threshold and the
     * run-level bound, and nearer this run's level than the baseline's
     * (so a regression that already reached the baseline is dated to where
     * it began, and one noisy run before it is not taken for its start).
     * This run counts whatever its median says: the per-step test already
     * found it worse. */
    double level = worse_by(r->run->direction, r->run->value, r->baseline);
    double need = fmax(fmax(r->threshold, r->spread), level / 2.0);
    size_t i = n, streak = 1;
    if (i > 0 && r->history_runs[i - 1] == cand->row.id)
        i--;
    r->since_run = cand->row.id;
    while (i-- > 0) {
        if (!(worse_by(r->run->direction, r->history_values[i],
                       r->baseline) > need))
            break;
        r->since_run = r->history_runs[i];
        streak++;
    }
    /* The HUD's rule, when asked for: so many runs in a row. */
    if (streak < st->consecutive)
        r->verdict = GUARD_SUSPECT;
    return 0;
}

void guard_result_free(guard_result *r)
{
    free(r->history_runs);
    free(r->history_values);
    free(r->change_runs);
}


static void guard_set_free(guard_set *g)
{
    for (size_t i = 0; i < g->n; i++)
        guard_run_free(&g->runs[i]);
    free(g->runs);
    free(g->base);
    free(g->hist);
    memset(g, 0, sizeof *g);
}

static void drop_samples(guard_run *run)
{
    for (size_t k = 0; k < run->n_m; k++) {
        free(run->m[k].v);
        run->m[k].v = NULL;
        run->m[k].n = run->m[k].cap = 0;
    }
}

static void reverse(const guard_run **a, size_t n)
{
    for (size_t i = 0; i < n / 2; i++) {
        const guard_run *t = a[i];
        a[i] = a[n - 1 - i];
        a[n - 1 - i] = t;
    }
}

/* Loads the baseline and the comparable history of CAND into G (the
 * explicit --baseline runs, or the last runs of its name with its
 * fingerprint that succeeded); says in REP which runs were left out and
 * how explicit ones differ.  Returns 0 or an SS_READ_* code. */
static int choose_and_load(ss_reader *rd, const guard_request *o,
                           const guard_settings *st, const guard_run *cand,
                           guard_set *g, guard_report *rep)
{
    ss_run_row *rows = NULL;
    size_t n_rows = 0;
    int rc = ss_reader_runs(rd, &rows, &n_rows);
    if (rc != 0)
        return rc;
    int64_t *explicit_ids = NULL;
    size_t n_explicit = 0;
    if (o->baseline &&
        parse_run_list(o->baseline, &explicit_ids, &n_explicit, rep->reason,
                       sizeof rep->reason) != 0) {
        ss_run_rows_free(rows, n_rows);
        return SS_READ_NOT_FOUND;
    }
    size_t cap = st->history + n_explicit + 1;
    g->runs = calloc(cap, sizeof *g->runs);
    g->base = calloc(cap, sizeof *g->base);
    g->hist = calloc(cap, sizeof *g->hist);
    if (!g->runs || !g->base || !g->hist) {
        snprintf(rep->reason, sizeof rep->reason, "out of memory");
        rc = SS_READ_ERROR;
    }
    ss_buf excluded = {0}, differences = {0};
    size_t n_excluded = 0;
    for (size_t i = n_rows; rc == 0 && i-- > 0 && g->n < cap;) {
        const ss_run_row *row = &rows[i];
        if (row->id == cand->row.id)
            continue;
        int is_explicit = 0;
        for (size_t k = 0; k < n_explicit; k++)
            is_explicit |= explicit_ids[k] == row->id;
        int same_name = row->name && cand->row.name &&
                        strcmp(row->name, cand->row.name) == 0;
        if (!is_explicit &&
            (o->baseline || !same_name || row->id > cand->row.id ||
             g->n_hist >= st->history))
            continue;
        if (!is_explicit &&
            !(row->status && strcmp(row->status, "succeeded") == 0)) {
            if (n_excluded++ < GUARD_MAX_LISTED)
                ss_buf_printf(&excluded, "%srun %lld: %s",
                              excluded.len ? "; " : "", (long long)row->id,
                              row->status ? row->status : "?");
            continue;
        }
        guard_run *run = &g->runs[g->n];
        rc = guard_load_identity(rd, row->id, run);
        if (rc != 0)
            break;
        g->n++;
        ss_buf diff = {0};
        int differs = fingerprint_diff(cand, run, &diff);
        if (is_explicit) {
            if (differs)
                ss_buf_printf(&differences, "%srun %lld: %s",
                              differences.len ? "; " : "",
                              (long long)row->id, diff.data);
            g->base[g->n_base++] = run;
            g->hist[g->n_hist++] = run;
            rc = guard_load_samples(rd, st, GUARD_LOAD_RANK_STEPS, run);
        } else if (differs) {
            if (n_excluded++ < GUARD_MAX_LISTED)
                ss_buf_printf(&excluded, "%srun %lld: %s",
                              excluded.len ? "; " : "", (long long)row->id,
                              diff.data);
            guard_run_free(run);
            g->n--;
        } else if (g->n_base < st->last) {
            g->hist[g->n_hist++] = run;
            g->base[g->n_base++] = run;
            rc = guard_load_samples(rd, st, GUARD_LOAD_RANK_STEPS, run);
        } else {
            /* Older history: the per-run medians of the steps table. */
            g->hist[g->n_hist++] = run;
            rc = guard_load_samples(rd, st, 0, run);
            drop_samples(run);
        }
        ss_buf_free(&diff);
    }
    if (n_excluded > GUARD_MAX_LISTED)
        ss_buf_printf(&excluded, "; and %zu more", n_excluded - GUARD_MAX_LISTED);
    reverse(g->base, g->n_base);
    reverse(g->hist, g->n_hist);
    rep->excluded = excluded.data ? excluded.data : strdup("");
    rep->differences = differences.data ? differences.data : strdup("");
    free(explicit_ids);
    ss_run_rows_free(rows, n_rows);
    if (rc == 0 && (!rep->excluded || !rep->differences))
        rc = SS_READ_ERROR;
    return rc;
}

const char *guard_verdict_word(guard_verdict v)
{
    switch (v) {
    case GUARD_REGRESSED: return "regressed";
    case GUARD_SUSPECT: return "suspect";
    case GUARD_IMPROVED: return "improved";
    case GUARD_SAME: return "same";
    case GUARD_SHOWN: return "shown";
    case GUARD_NO_DATA: break;
    }
    return "no_data";
}

const char *guard_status_word(int status)
{
    return status == SS_GUARD_OK ? "ok"
           : status == SS_GUARD_REGRESSION ? "regression"
                                           : "cannot_judge";
}

void guard_settings_free(guard_settings *s)
{
    for (size_t i = 0; i < s->n_thresholds; i++)
        free(s->thresholds[i]);
    free(s->thresholds);
    s->thresholds = NULL;
    s->n_thresholds = 0;
}

void guard_judgement_free(guard_judgement *j)
{
    ss_diff_result_free(&j->rep.det.diff);
    guard_report *rep = &j->rep;
    for (size_t i = 0; i < rep->n_results; i++)
        guard_result_free(&rep->results[i]);
    free(rep->results);
    free(rep->baseline_ids);
    free(rep->excluded);
    free(rep->differences);
    guard_set_free(&j->set);
    guard_run_free(&j->cand);
    memset(j, 0, sizeof *j);
}

/* The metrics' judgement (guard_judge without determinism). */
static int judge_metrics(ss_reader *rd, const guard_request *q,
                         const guard_settings *st, guard_judgement *j,
                         char *err, size_t errlen)
{
    memset(j, 0, sizeof *j);
    guard_report *rep = &j->rep;
    guard_set *g = &j->set;
    rep->settings = st;
    rep->run = &j->cand;
    rep->status = SS_GUARD_CANNOT_JUDGE;
    rep->db = ss_reader_path(rd);
    int64_t run_id = 0;
    int rc = ss_reader_select_run(rd, q->selector, &run_id);
    if (rc == 0)
        rc = guard_load_run(rd, run_id, st, &j->cand);
    if (rc == 0)
        rc = choose_and_load(rd, q, st, &j->cand, g, rep);
    if (rc != 0) {
        snprintf(err, errlen, "%s",
                 rep->reason[0] ? rep->reason : ss_reader_errmsg(rd));
        return rc;
    }
    const guard_run *cand = &j->cand;
    rep->n_baseline = g->n_base;
    rep->baseline_ids = calloc(g->n_base + 1, sizeof *rep->baseline_ids);
    rep->results = calloc(cand->n_m + 1, sizeof *rep->results);
    if (!rep->baseline_ids || !rep->results)
        goto oom;
    for (size_t i = 0; i < g->n_base; i++)
        rep->baseline_ids[i] = g->base[i]->row.id;
    const guard_series *steps = guard_find_series(cand, "step_time");
    if (!steps || steps->n < 2 * st->block) {
        snprintf(rep->reason, sizeof rep->reason,
                 "run %lld has %zu steps after the first %zu (warm-up): too "
                 "few to judge", (long long)cand->row.id,
                 steps ? steps->n : (size_t)0, st->warmup);
        return 0;
    }
    if (g->n_base < st->min_runs) {
        snprintf(rep->reason, sizeof rep->reason,
                 "%zu comparable run%s of '%s' before run %lld (at least %zu "
                 "needed)%s%s", g->n_base, g->n_base == 1 ? "" : "s",
                 cand->row.name ? cand->row.name : "", (long long)cand->row.id,
                 st->min_runs, rep->excluded[0] ? "; left out: " : "",
                 rep->excluded);
        return 0;
    }
    /* The baselines as a contiguous array for compare_metric. */
    guard_run *base = malloc(g->n_base * sizeof *base);
    if (!base)
        goto oom;
    for (size_t i = 0; i < g->n_base; i++)
        base[i] = *g->base[i];
    rep->status = SS_GUARD_OK;
    for (size_t i = 0; i < cand->n_m; i++) {
        const guard_series *s = &cand->m[i];
        if (!guard_wanted_metric(s->name, q->metrics, q->n_metrics))
            continue;
        guard_result *r = &rep->results[rep->n_results++];
        if (compare_metric(r, s, base, g->n_base, st) != 0 ||
            guard_history_of(r, s->name, g->hist, g->n_hist, cand, st) != 0) {
            free(base);
            goto oom;
        }
        if (r->verdict == GUARD_REGRESSED)
            rep->status = SS_GUARD_REGRESSION;
    }
    free(base);
    if (q->n_metrics && rep->n_results == 0) {
        snprintf(rep->reason, sizeof rep->reason,
                 "run %lld has none of the metrics asked for",
                 (long long)cand->row.id);
        rep->status = SS_GUARD_CANNOT_JUDGE;
    }
    return 0;
oom:
    rep->status = SS_GUARD_CANNOT_JUDGE;
    snprintf(err, errlen, "out of memory");
    return SS_READ_ERROR;
}

/* --set determinism=1: the candidate against the newest baseline run
 * (comparable runs share the command line, so the seed it gives), through
 * run_diff.c.  A divergence is a regression whatever the metrics say; a
 * comparison that cannot be made (no baseline run, no checksums, another
 * world size) leaves the run not judged unless a metric regressed. */
static void judge_determinism(ss_reader *rd, guard_judgement *j)
{
    guard_report *rep = &j->rep;
    guard_determinism *d = &rep->det;
    d->checked = 1;
    const char *why = NULL;
    char err[512], run_a[32], run_b[32];
    if (j->set.n_base == 0) {
        why = "no baseline run to compare with";
        snprintf(d->text, sizeof d->text, "%s", why);
    } else {
        d->against = j->set.base[j->set.n_base - 1]->row.id;
        snprintf(run_a, sizeof run_a, "%lld", (long long)d->against);
        snprintf(run_b, sizeof run_b, "%lld", (long long)j->cand.row.id);
        d->a = (ss_diff_side){.r = rd, .spec = run_a};
        d->b = (ss_diff_side){.r = rd, .spec = run_b};
        if (ss_run_diff(&d->a, &d->b, 0, &d->diff, err, sizeof err) != 0) {
            d->against = 0;
            why = err;
            snprintf(d->text, sizeof d->text, "cannot compare: %s", err);
        } else if (d->diff.status == SS_DIFF_INCOMPARABLE) {
            why = d->diff.why;
            snprintf(d->text, sizeof d->text, "cannot compare with run %lld: "
                     "%s", (long long)d->against, why);
        } else if (d->diff.status == SS_DIFF_IDENTICAL) {
            snprintf(d->text, sizeof d->text, "identical to run %lld (%lld "
                     "common steps, %lld with checksums)",
                     (long long)d->against, (long long)d->diff.common,
                     (long long)d->diff.checksum_steps);
        } else {
            const ss_diff_result *x = &d->diff;
            int n = snprintf(d->text, sizeof d->text, "diverged from run "
                             "%lld at step %lld on rank %d%s: %s differs "
                             "first", (long long)d->against,
                             (long long)x->step, x->ranks[0],
                             x->n_ranks_total > 1 ? " and others" : "",
                             strcmp(x->what, "checksum") == 0
                                 ? "the parameters' checksum"
                                 : x->what);
            if (x->param[0] && n > 0 && (size_t)n < sizeof d->text)
                snprintf(d->text + n, sizeof d->text - (size_t)n, "; first "
                         "parameter %s", x->param);
            rep->status = SS_GUARD_REGRESSION;
        }
        d->a.spec = d->b.spec = NULL; /* run_a, run_b: this frame's */
    }
    if (why && rep->status != SS_GUARD_REGRESSION) {
        size_t n = strlen(rep->reason);
        snprintf(rep->reason + n, sizeof rep->reason - n, "%sdeterminism: %s",
                 n ? "; " : "", why);
        rep->status = SS_GUARD_CANNOT_JUDGE;
    }
}

int guard_judge(ss_reader *rd, const guard_request *q,
                const guard_settings *st, guard_judgement *j, char *err,
                size_t errlen)
{
    int rc = judge_metrics(rd, q, st, j, err, errlen);
    if (rc == 0 && st->determinism)
        judge_determinism(rd, j);
    return rc;
}
