/*
 * top.c - `stepscope top`: a live terminal view of a running job (top.h,
 * docs/top.md).
 *
 * Finding the job: --url, else the live-run files that `stepscope run`
 * writes beside the store, in PATH.d/live/ (store_files.h; run-ID.json:
 * {"url", "pid", "run_id", "token" when the API is not on loopback}); a
 * file whose controller process is gone is stale and ignored.  Without RUN
 * the newest live run is shown.
 *
 * Each refresh GETs, from the controller's API (docs/api.md), /api/live
 * (is the run still going), /api/runs/ID/ranks (state, current phase, last
 * step, last heard), /steps?limit=N (worst vs median step time of the
 * latest finalized steps), /heatmap?limit=N (each rank's recent step times,
 * for its bar against the median rank) and /findings.  The step rate is
 * measured from how fast the last finalized step advances between
 * refreshes.  Responses are parsed with cJSON.
 *
 * Terminal: the view draws on the alternate screen with the cursor hidden,
 * reads keys with canonical mode and echo off (signals stay on, so Ctrl-C
 * is SIGINT), and repaints from the top-left corner, clearing each line's
 * rest, so nothing flickers and a smaller window is simply drawn smaller.
 * Signals only set flags and wake the loop through a pipe; the loop always
 * restores the terminal (mode, cursor, main screen) before it returns, and
 * Ctrl-Z restores it before stopping.  When the controller goes away or the
 * run ends, the last frame is printed on the main screen with the reason,
 * so it stays readable after the view has gone.
 */
#include "top.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "headline.h"
#include "httpget.h"
#include "live_find.h"
#include "query.h"
#include "reader.h"
#include "store.h"
#include "store_files.h"

#define RECENT_STEPS 20  /* steps behind the worst-vs-median line */
#define HEAT_STEPS 16    /* steps behind each rank's bar */
#define MAX_FINDINGS 8
#define FINDING_HEAD 36   /* columns before a finding's message, about */
#define FINDING_INDENT 10 /* a finding's continuation lines */
#define REQUEST_TIMEOUT_MS 3000

typedef struct {
    int64_t rank, last_step, current_step;
    char state[24], phase[64];
    double phase_s, heard_s; /* < 0 unknown */
    double recent_ms;        /* median over the recent steps; < 0 none */
    double ratio;            /* recent_ms / the median rank's; < 0 none */
} rank_view;

#define FINDING_RANKS 9 /* ranks kept per finding (the headline lists 8) */

typedef struct {
    char severity[16], kind[32], phase[64], message[512];
    int64_t first_step, last_step;
    int64_t ranks[FINDING_RANKS];
    size_t n_ranks;
} finding_view;

typedef struct {
    /* the controller */
    char url[512], token[256];
    int64_t run_id;
    char run_name[128];
    long pid;            /* the controller's, from its first answer; 0 */
    /* the latest refresh */
    int reached;         /* the controller answered */
    int running;         /* the run is still going */
    char problem[320];   /* why the latest refresh failed; "" when it did not */
    rank_view *ranks;
    size_t n_ranks;
    int64_t last_final;  /* the latest finalized step; -1 none */
    double med_ms, worst_ms; /* medians over the recent steps; < 0 none */
    int64_t worst_rank;  /* the rank most often worst among them; -1 */
    int n_recent;
    finding_view findings[MAX_FINDINGS]; /* newest first */
    size_t n_findings, findings_total;
    finding_view headline; /* the first in the API's order (headline.h) */
    /* the step rate, from how the last finalized step advances */
    double hist_t[32];
    int64_t hist_step[32];
    size_t n_hist;
    double rate;         /* steps/s; < 0 unknown */
    int rate_estimated;  /* from the step time, not yet measured */
} view;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- JSON helpers ---- */

static double jnum(const cJSON *o, const char *key, double def)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(it) ? it->valuedouble : def;
}

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of V[0..N) (reordered); -1 when N == 0. */
static double median(double *v, size_t n)
{
    if (n == 0)
        return -1;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- finding the controller ---- */

/* Finds the controller of run O->run (or of the newest live run) into V
 * (live_find.h).  Returns 0, or -1 with ERR. */
static int locate(const ss_top_opts *o, view *v, char *err, size_t errlen)
{
    ss_live_target t;
    if (ss_live_find(o->live.db, o->live.run, o->live.url, o->live.token, &t,
                     err, errlen) != 0)
        return -1;
    copy(v->url, sizeof v->url, t.url);
    copy(v->token, sizeof v->token, t.token);
    if (t.run_id > 0)
        v->run_id = t.run_id;
    return 0;
}

/* ---- refreshing ---- */

/* GETs PATH as JSON.  Returns the document, or NULL with v->problem set
 * (and v->reached cleared when the controller could not be reached). */
static cJSON *get_json(view *v, const char *path)
{
    ss_httpget_reply r;
    char err[256];
    if (ss_httpget(v->url, path, v->token[0] ? v->token : NULL,
                   REQUEST_TIMEOUT_MS, &r, err, sizeof err) != 0) {
        v->reached = 0;
        snprintf(v->problem, sizeof v->problem, "the controller at %s does "
                 "not answer (%s): the run has probably ended", v->url, err);
        return NULL;
    }
    cJSON *doc = cJSON_Parse(r.body);
    if (r.status != 200 || !doc) {
        const char *msg = doc ? jstr(doc, "error") : NULL;
        snprintf(v->problem, sizeof v->problem, "%s%s answered %d: %s",
                 v->url, path + 1, r.status,
                 msg ? msg : doc ? "?" : "not JSON");
        cJSON_Delete(doc);
        doc = NULL;
    }
    ss_httpget_free(&r);
    return doc;
}

static void take_ranks(view *v, const cJSON *doc)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "ranks");
    size_t n = (size_t)cJSON_GetArraySize(arr);
    rank_view *rv = calloc(n ? n : 1, sizeof *rv);
    if (!rv)
        return;
    size_t k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        rank_view *r = &rv[k++];
        r->rank = (int64_t)jnum(it, "rank", (double)(k - 1));
        r->last_step = (int64_t)jnum(it, "last_step", -1);
        r->current_step = (int64_t)jnum(it, "current_step", -1);
        copy(r->state, sizeof r->state, jstr(it, "state"));
        copy(r->phase, sizeof r->phase, jstr(it, "phase"));
        r->phase_s = jnum(it, "phase_s", -1);
        r->heard_s = jnum(it, "last_heard_s", -1);
        r->recent_ms = r->ratio = -1;
    }
    free(v->ranks);
    v->ranks = rv;
    v->n_ranks = k;
}

static void take_steps(view *v, const cJSON *doc)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "steps"), *it;
    double med[RECENT_STEPS], worst[RECENT_STEPS];
    int64_t wr[RECENT_STEPS];
    size_t n = 0;
    v->last_final = -1;
    cJSON_ArrayForEach(it, arr) {
        v->last_final = (int64_t)jnum(it, "step", -1);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(it, "step_ms");
        double m = jnum(st, "median", -1), w = jnum(st, "max", -1);
        if (m < 0 || w < 0 || n == RECENT_STEPS)
            continue;
        med[n] = m;
        worst[n] = w;
        wr[n] = (int64_t)jnum(st, "worst_rank", -1);
        n++;
    }
    v->n_recent = (int)n;
    v->worst_rank = -1;
    int best = 0;
    for (size_t i = 0; i < n; i++) { /* the most frequent worst rank */
        int c = 0;
        for (size_t k = 0; k < n; k++)
            c += wr[k] == wr[i];
        if (c > best && wr[i] >= 0) {
            best = c;
            v->worst_rank = wr[i];
        }
    }
    v->med_ms = median(med, n);
    v->worst_ms = median(worst, n);
}

/* Each rank's median over the recent steps, and its ratio to the median
 * of those medians. */
static void take_heatmap(view *v, const cJSON *doc)
{
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(doc, "ranks");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "step_ms");
    size_t nr = (size_t)cJSON_GetArraySize(ranks);
    double *meds = calloc(nr ? nr : 1, sizeof *meds);
    double vals[4096];
    if (!meds)
        return;
    size_t n_meds = 0;
    for (size_t i = 0; i < nr; i++) {
        int64_t rank = (int64_t)cJSON_GetArrayItem(ranks, (int)i)->valuedouble;
        const cJSON *row = cJSON_GetArrayItem(rows, (int)i), *c;
        size_t n = 0;
        cJSON_ArrayForEach(c, row) {
            if (cJSON_IsNumber(c) && n < sizeof vals / sizeof vals[0])
                vals[n++] = c->valuedouble;
        }
        double m = median(vals, n);
        for (size_t k = 0; k < v->n_ranks; k++)
            if (v->ranks[k].rank == rank)
                v->ranks[k].recent_ms = m;
        if (m >= 0)
            meds[n_meds++] = m;
    }
    double mid = median(meds, n_meds);
    for (size_t k = 0; k < v->n_ranks && mid > 0; k++)
        if (v->ranks[k].recent_ms >= 0)
            v->ranks[k].ratio = v->ranks[k].recent_ms / mid;
    free(meds);
}

static void take_findings(view *v, const cJSON *doc)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "findings"), *it;
    v->n_findings = 0;
    v->findings_total = 0;
    memset(&v->headline, 0, sizeof v->headline);
    cJSON_ArrayForEach(it, arr) {
        v->findings_total++;
        finding_view f;
        copy(f.severity, sizeof f.severity, jstr(it, "severity"));
        copy(f.kind, sizeof f.kind, jstr(it, "kind"));
        copy(f.message, sizeof f.message, jstr(it, "message"));
        copy(f.phase, sizeof f.phase, jstr(it, "phase"));
        f.first_step = (int64_t)jnum(it, "first_step", -1);
        f.last_step = (int64_t)jnum(it, "last_step", -1);
        f.n_ranks = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(it, "ranks"))
            if (cJSON_IsNumber(r) && f.n_ranks < FINDING_RANKS)
                f.ranks[f.n_ranks++] = (int64_t)r->valuedouble;
        /* The API lists critical first, then by first step: its first is
         * the headline every view leads with. */
        if (v->findings_total == 1)
            v->headline = f;
        /* Keep the newest (latest last_step) first. */
        size_t pos = v->n_findings;
        while (pos > 0 && v->findings[pos - 1].last_step < f.last_step)
            pos--;
        if (pos >= MAX_FINDINGS)
            continue;
        size_t move = v->n_findings - pos - (v->n_findings == MAX_FINDINGS);
        memmove(&v->findings[pos + 1], &v->findings[pos],
                move * sizeof f);
        v->findings[pos] = f;
        if (v->n_findings < MAX_FINDINGS)
            v->n_findings++;
    }
}

static void update_rate(view *v, double now)
{
    if (v->last_final >= 0) {
        if (v->n_hist == sizeof v->hist_t / sizeof v->hist_t[0]) {
            memmove(v->hist_t, v->hist_t + 1, (v->n_hist - 1) * sizeof(double));
            memmove(v->hist_step, v->hist_step + 1,
                    (v->n_hist - 1) * sizeof(int64_t));
            v->n_hist--;
        }
        v->hist_t[v->n_hist] = now;
        v->hist_step[v->n_hist] = v->last_final;
        v->n_hist++;
    }
    v->rate = -1;
    v->rate_estimated = 0;
    size_t old = 0;
    while (old + 1 < v->n_hist && now - v->hist_t[old] > 10.0)
        old++;
    if (v->n_hist && now - v->hist_t[old] >= 1.5) {
        v->rate = (double)(v->last_final - v->hist_step[old]) /
                  (now - v->hist_t[old]);
    } else if (v->med_ms > 0) {
        v->rate = 1000.0 / v->med_ms;
        v->rate_estimated = 1;
    }
}

/* One refresh.  Returns 0 when every document came, else -1 (the reason in
 * v->problem; v->reached says whether the controller answered at all). */
static int refresh(view *v)
{
    v->problem[0] = '\0';
    v->reached = 1;
    cJSON *live = get_json(v, "/api/live");
    if (!live)
        return -1;
    int running = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(live,
                                                                "running"));
    int64_t id = (int64_t)jnum(live, "run_id", -1);
    long pid = (long)jnum(live, "pid", 0);
    cJSON_Delete(live);
    if (v->pid && pid && pid != v->pid) {
        /* the controller watched ended and another took its address */
        v->reached = 0;
        snprintf(v->problem, sizeof v->problem, "the controller at %s is "
                 "another one now (pid %ld, not %ld): the run has ended",
                 v->url, pid, v->pid);
        return -1;
    }
    if (!v->pid)
        v->pid = pid;
    v->running = running; /* only the watched controller's answer counts */
    if (id > 0)
        v->run_id = id;
    char path[128];
    if (!v->run_name[0]) {
        snprintf(path, sizeof path, "/api/runs/%" PRId64, v->run_id);
        cJSON *run = get_json(v, path);
        if (!run)
            return -1;
        copy(v->run_name, sizeof v->run_name,
             jstr(cJSON_GetObjectItemCaseSensitive(run, "run"), "name"));
        cJSON_Delete(run);
    }
    /* All four documents, or the last complete view stays. */
    static const char *const docs[] = {"ranks", "steps?limit=%d",
                                       "heatmap?limit=%d", "findings"};
    static const int limits[] = {0, RECENT_STEPS, HEAT_STEPS, 0};
    cJSON *doc[4] = {NULL, NULL, NULL, NULL};
    int ok = 1;
    for (int i = 0; i < 4 && ok; i++) {
        char name[64];
        snprintf(name, sizeof name, docs[i], limits[i]);
        snprintf(path, sizeof path, "/api/runs/%" PRId64 "/%s", v->run_id,
                 name);
        ok = (doc[i] = get_json(v, path)) != NULL;
    }
    if (ok) {
        take_ranks(v, doc[0]);
        take_steps(v, doc[1]);
        take_heatmap(v, doc[2]);
        take_findings(v, doc[3]);
        update_rate(v, mono_s());
    }
    for (int i = 0; i < 4; i++)
        cJSON_Delete(doc[i]);
    return ok ? 0 : -1;
}

/* ---- drawing ---- */

typedef struct {
    ss_buf *b;
    int cols, rows, ansi;
    int used; /* lines written */
} frame;

/* Bytes of S that fit in COLS terminal columns (UTF-8 aware: a
 * continuation byte takes no column). */
static size_t fit(const char *s, int cols)
{
    size_t i = 0;
    int w = 0;
    for (; s[i]; i++) {
        if (((unsigned char)s[i] & 0xc0) == 0x80)
            continue;
        if (w == cols)
            break;
        w++;
    }
    return i;
}

static void line(frame *fr, const char *color, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds one line, cut to the width, coloured with the SGR code COLOR (ANSI
 * only); nothing once the frame is full. */
static void line(frame *fr, const char *color, const char *fmt, ...)
{
    if (fr->rows > 0 && fr->used >= fr->rows)
        return;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    for (char *p = text; *p; p++) /* no control bytes from the wire */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    size_t n = fit(text, fr->cols);
    if (fr->ansi && color)
        ss_buf_printf(fr->b, "\033[%sm", color);
    ss_buf_add(fr->b, text, n);
    if (fr->ansi && color)
        ss_buf_puts(fr->b, "\033[0m");
    ss_buf_puts(fr->b, fr->ansi ? "\033[K\r\n" : "\n");
    fr->used++;
}

/* Bytes of S (no longer than its length) that fit in COLS columns,
 * ending at a space when one is there, so that a wrapped line breaks
 * between words. */
static size_t fit_words(const char *s, int cols)
{
    size_t n = fit(s, cols);
    if (!s[n])
        return n;
    for (size_t i = n; i > 0; i--)
        if (s[i] == ' ')
            return i;
    return n;
}

/* Lines that TEXT takes wrapped at COLS columns after a first-line prefix
 * of FIRST columns, continuation lines indented by INDENT. */
static int wrapped_lines(const char *text, int cols, int first, int indent)
{
    int n = 0, w = cols - first;
    while (*text) {
        size_t k = fit_words(text, w > 8 ? w : 8);
        text += k;
        while (*text == ' ')
            text++;
        n++;
        w = cols - indent;
    }
    return n ? n : 1;
}

/* Adds TEXT after PREFIX, wrapped between words at the width (continuation
 * lines indented by INDENT), instead of cut: a finding is read whole. */
static void line_wrapped(frame *fr, const char *color, const char *prefix,
                         int indent, const char *text)
{
    char part[1024];
    int first = (int)strlen(prefix);
    int w = fr->cols - first;
    const char *p = text;
    int lead = 1;
    do {
        size_t k = fit_words(p, w > 8 ? w : 8);
        if (k >= sizeof part)
            k = sizeof part - 1;
        memcpy(part, p, k);
        part[k] = '\0';
        if (lead)
            line(fr, color, "%s%s", prefix, part);
        else
            line(fr, color, "%*s%s", indent, "", part);
        p += k;
        while (*p == ' ')
            p++;
        lead = 0;
        w = fr->cols - indent;
    } while (*p);
}

static void fmt_secs(char *out, size_t cap, double s)
{
    if (s < 0)
        snprintf(out, cap, "-");
    else if (s < 10)
        snprintf(out, cap, "%.1fs", s);
    else if (s < 600)
        snprintf(out, cap, "%.0fs", s);
    else
        snprintf(out, cap, "%.0fm", s / 60);
}

/* How interesting a rank is when not all fit: not running first, then the
 * slowest. */
static int cmp_interest(const void *a, const void *b)
{
    const rank_view *x = a, *y = b;
    int xr = strcmp(x->state, "running") == 0, yr = strcmp(y->state,
                                                          "running") == 0;
    if (xr != yr)
        return xr - yr;
    if (x->ratio != y->ratio)
        return x->ratio > y->ratio ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static void draw_bar(char *out, int width, double ratio)
{
    int mid = width / 2, len = ratio < 0 ? 0 : (int)lround(ratio * mid);
    for (int i = 0; i < width; i++)
        out[i] = i < len ? (i < mid ? '#' : '+') : i == mid ? '|' : ' ';
    if (len > width)
        out[width - 1] = '>';
    out[width] = '\0';
}

static void draw_rank(frame *fr, const rank_view *r, int bar_w)
{
    char bar[128] = "", ratio[16] = "    -", ms[16] = "      -";
    char phase[96], heard[16], step[24];
    if (bar_w > 0)
        draw_bar(bar, bar_w, r->ratio);
    if (r->ratio >= 0)
        snprintf(ratio, sizeof ratio, "%4.2fx", r->ratio);
    if (r->recent_ms >= 0)
        snprintf(ms, sizeof ms, "%7.1f", r->recent_ms);
    if (strcmp(r->state, "running") != 0) {
        copy(phase, sizeof phase, r->state[0] ? r->state : "?");
    } else if (r->phase[0]) {
        char t[16];
        fmt_secs(t, sizeof t, r->phase_s);
        snprintf(phase, sizeof phase, "%s %s", r->phase, t);
    } else {
        copy(phase, sizeof phase, r->current_step >= 0 ? "(in step)"
                                                       : "(between steps)");
    }
    fmt_secs(heard, sizeof heard, r->heard_s);
    if (r->last_step >= 0)
        snprintf(step, sizeof step, "%" PRId64, r->last_step);
    else
        copy(step, sizeof step, "-");
    const char *color = strcmp(r->state, "failed") == 0 ? "31"
                        : r->ratio >= 1.10             ? "33"
                                                       : NULL;
    line(fr, color, "%5" PRId64 " %8s %s %s %s %-22s %6s", r->rank, step, bar,
         ratio, ms, phase, heard);
}

/* Renders V into B for a COLS x ROWS terminal (ROWS 0: no limit). */
static void render(const view *v, int cols, int rows, int ansi, ss_buf *b)
{
    frame fr = {b, cols < 20 ? 20 : cols, rows, ansi, 0};
    if (ansi)
        ss_buf_puts(b, "\033[H");
    char clock[16];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(clock, sizeof clock, "%H:%M:%S", &tm);
    line(&fr, "1", "stepscope top  run %" PRId64 " %s  %zu ranks  %s  %s  %s",
         v->run_id, v->run_name[0] ? v->run_name : "?", v->n_ranks, v->url,
         !v->reached ? "[gone]" : v->running ? "[running]" : "[finished]",
         clock);
    char step[24] = "-", rate[32] = "-", med[24] = "-", worst[80] = "-";
    if (v->last_final >= 0)
        snprintf(step, sizeof step, "%" PRId64, v->last_final);
    if (v->rate >= 0)
        snprintf(rate, sizeof rate, "%s%.1f", v->rate_estimated ? "~" : "",
                 v->rate);
    if (v->med_ms >= 0)
        snprintf(med, sizeof med, "%.1f ms", v->med_ms);
    /* the rank most often worst by step time is named only when it does
     * not contradict the headline (synchronisation evens step times) */
    int worst_named = v->worst_rank >= 0 && v->headline.n_ranks == 0;
    for (size_t k = 0; k < v->headline.n_ranks; k++)
        worst_named |= v->headline.ranks[k] == v->worst_rank;
    if (v->worst_ms >= 0 && v->med_ms > 0 && worst_named)
        snprintf(worst, sizeof worst, "%.1f ms (%+.0f %%, mostly rank %"
                 PRId64 ")", v->worst_ms,
                 (v->worst_ms / v->med_ms - 1) * 100, v->worst_rank);
    else if (v->worst_ms >= 0 && v->med_ms > 0)
        snprintf(worst, sizeof worst, "%.1f ms (%+.0f %%)", v->worst_ms,
                 (v->worst_ms / v->med_ms - 1) * 100);
    line(&fr, NULL, "step %s  %s steps/s  last %d steps: median rank %s, "
         "worst rank %s", step, rate, v->n_recent, med, worst);
    if (v->problem[0])
        line(&fr, "31", "%s", v->problem);
    if (v->findings_total) {
        const finding_view *h = &v->headline;
        ss_buf hl = {0};
        ss_headline(&hl, h->kind, h->severity, h->ranks, h->n_ranks,
                    h->phase);
        line_wrapped(&fr, strcmp(h->severity, "critical") == 0 ? "1;31"
                                                               : "1;33",
                     "headline: ", 10, hl.data ? hl.data : "");
        ss_buf_free(&hl);
    }
    line(&fr, NULL, "%s", "");

    int bar_w = fr.cols >= 90 ? (fr.cols - 70 > 40 ? 40 : fr.cols - 70) : 0;
    char bar_head[64] = "";
    if (bar_w > 0)
        snprintf(bar_head, sizeof bar_head, "%-*s", bar_w,
                 "step time vs median rank (| = 1x)");
    line(&fr, "7", " RANK     STEP %s RATIO      MS PHASE                   "
         "HEARD", bar_head);
    int findings_lines = 2;
    for (size_t i = 0; i < v->n_findings; i++)
        findings_lines += wrapped_lines(v->findings[i].message, fr.cols,
                                        FINDING_HEAD, FINDING_INDENT);
    if (findings_lines > 12)
        findings_lines = 12;
    int room = rows > 0 ? rows - fr.used - findings_lines - 1 : INT_MAX;
    if (room < 1)
        room = 1;
    rank_view *order = malloc((v->n_ranks ? v->n_ranks : 1) * sizeof *order);
    if (order) {
        memcpy(order, v->ranks, v->n_ranks * sizeof *order);
        size_t show = v->n_ranks;
        if ((size_t)room < v->n_ranks) {
            qsort(order, v->n_ranks, sizeof *order, cmp_interest);
            show = (size_t)room - 1;
        }
        for (size_t i = 0; i < show; i++)
            draw_rank(&fr, &order[i], bar_w);
        if (show < v->n_ranks)
            line(&fr, NULL, "  ... %zu more ranks (showing the slowest %zu; "
                 "make the window taller to see more)", v->n_ranks - show,
                 show);
        free(order);
    }
    line(&fr, NULL, "%s", "");
    if (v->findings_total == 0) {
        line(&fr, NULL, "no findings yet");
    } else {
        line(&fr, "1", "findings (%zu), newest first:", v->findings_total);
        for (size_t i = 0; i < v->n_findings; i++) {
            const finding_view *f = &v->findings[i];
            int crit = strcmp(f->severity, "critical") == 0;
            char head[96];
            snprintf(head, sizeof head, " %-8s %-12s steps %" PRId64 "-%"
                     PRId64 "  ", crit ? "CRITICAL" : "warning", f->kind,
                     f->first_step, f->last_step);
            line_wrapped(&fr, crit ? "31" : "33", head, FINDING_INDENT,
                         f->message);
        }
    }
    if (ansi) {
        /* The key help on the last line, the rest of the screen cleared. */
        ss_buf_puts(b, "\033[J");
        if (rows > 0)
            ss_buf_printf(b, "\033[%d;1H\033[7m q quit \033[0m", rows);
    }
}

/* ---- the terminal ---- */

static volatile sig_atomic_t sig_quit, sig_winch, sig_tstp;
static int wake_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    if (sig == SIGWINCH)
        sig_winch = 1;
    else if (sig == SIGTSTP)
        sig_tstp = 1;
    else
        sig_quit = 1;
    char c = 0;
    if (write(wake_pipe[1], &c, 1) < 0) {
        /* the pipe is full: the loop is awake anyway */
    }
    errno = saved;
}

typedef struct {
    int fd_in, fd_out;
    struct termios saved;
    int raw; /* the terminal is in our mode */
} term;

static void term_enter(term *t)
{
    struct termios raw = t->saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    tcsetattr(t->fd_in, TCSANOW, &raw);
    static const char enter[] = "\033[?1049h\033[?25l\033[H\033[2J";
    if (write(t->fd_out, enter, sizeof enter - 1) < 0) {
        /* nothing to do: the next frame tries again */
    }
    t->raw = 1;
}

static void term_leave(term *t)
{
    if (!t->raw)
        return;
    static const char leave[] = "\033[0m\033[?25h\033[?1049l";
    if (write(t->fd_out, leave, sizeof leave - 1) < 0) {
        /* the terminal is gone; restoring its mode still matters */
    }
    tcsetattr(t->fd_in, TCSANOW, &t->saved);
    t->raw = 0;
}

static void term_size(int fd, int *cols, int *rows)
{
    struct winsize ws;
    *cols = 80;
    *rows = 24;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        *cols = ws.ws_col;
        *rows = ws.ws_row;
    }
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

/* The interactive view.  Returns the exit status. */
static int interactive(view *v, double interval, FILE *out, FILE *err)
{
    term t = {STDIN_FILENO, fileno(out), {0}, 0};
    if (tcgetattr(t.fd_in, &t.saved) != 0 || pipe2(wake_pipe, O_CLOEXEC |
                                                   O_NONBLOCK) != 0) {
        fprintf(err, "stepscope top: cannot set up the terminal: %s\n",
                strerror(errno));
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP};
    struct sigaction old[5];
    for (int i = 0; i < 5; i++)
        sigaction(sigs[i], &sa, &old[i]);
    fflush(out);
    term_enter(&t);
    ss_buf b = {0};
    int ended = !v->reached || !v->running, first = 1;
    double next = mono_s() + interval; /* the caller has just refreshed */
    while (!sig_quit) {
        double now = mono_s();
        int redraw = sig_winch || first;
        sig_winch = 0;
        first = 0;
        if (now >= next) {
            refresh(v);
            next = now + interval;
            redraw = 1;
            ended = !v->reached || !v->running;
        }
        if (redraw || ended) {
            int cols, rows;
            term_size(t.fd_out, &cols, &rows);
            ss_buf_reset(&b);
            render(v, cols, rows, 1, &b);
            if (b.data)
                write_all(t.fd_out, b.data, b.len);
        }
        if (ended)
            break;
        struct pollfd p[2] = {{.fd = t.fd_in, .events = POLLIN},
                              {.fd = wake_pipe[0], .events = POLLIN}};
        int wait_ms = (int)((next - mono_s()) * 1000);
        if (poll(p, 2, wait_ms < 0 ? 0 : wait_ms) > 0) {
            char keys[64];
            if (p[1].revents & POLLIN)
                while (read(wake_pipe[0], keys, sizeof keys) > 0) {
                }
            ssize_t n = (p[0].revents & (POLLIN | POLLHUP))
                            ? read(t.fd_in, keys, sizeof keys)
                            : 0;
            if (p[0].revents & POLLHUP)
                sig_quit = 1; /* the terminal went away */
            for (ssize_t i = 0; i < n; i++)
                if (keys[i] == 'q' || keys[i] == 'Q')
                    sig_quit = 1;
        }
        if (sig_tstp) {
            /* Ctrl-Z: give the terminal back, stop, take it again. */
            sig_tstp = 0;
            term_leave(&t);
            signal(SIGTSTP, SIG_DFL);
            raise(SIGTSTP);
            sigaction(SIGTSTP, &sa, NULL);
            term_enter(&t);
            sig_winch = 1;
        }
    }
    term_leave(&t);
    for (int i = 0; i < 5; i++)
        sigaction(sigs[i], &old[i], NULL);
    close(wake_pipe[0]);
    close(wake_pipe[1]);
    wake_pipe[0] = wake_pipe[1] = -1;
    sig_quit = 0;
    if (ended) {
        /* Leave the last state readable on the main screen. */
        int cols, rows;
        term_size(t.fd_out, &cols, &rows);
        ss_buf_reset(&b);
        render(v, cols, 0, 0, &b);
        if (b.data)
            fputs(b.data, out);
        if (!v->reached)
            fprintf(err, "stepscope top: %s\n", v->problem);
        else
            fprintf(err, "stepscope top: run %" PRId64 " has finished\n",
                    v->run_id);
    }
    ss_buf_free(&b);
    fflush(out);
    return 0;
}

/* ---- the command ---- */

int ss_top_cmd(const ss_top_opts *o, FILE *out, FILE *err)
{
    int rc;
    view v;
    memset(&v, 0, sizeof v);
    v.last_final = v.worst_rank = -1;
    v.rate = v.med_ms = v.worst_ms = -1;
    char msg[1024];
    if (locate(o, &v, msg, sizeof msg) != 0) {
        fprintf(err, "stepscope top: %s\n", msg);
        return 1;
    }
    int tty = out == stdout && isatty(STDIN_FILENO) && isatty(fileno(out));
    if (tty && !o->once) {
        if (refresh(&v) != 0 && !v.reached) {
            fprintf(err, "stepscope top: %s\n", v.problem);
            free(v.ranks);
            return 1;
        }
        rc = interactive(&v, o->interval_s, out, err);
    } else {
        if (refresh(&v) != 0) {
            fprintf(err, "stepscope top: %s\n", v.problem);
            rc = 1;
        } else {
            ss_buf b = {0};
            const char *c = getenv("COLUMNS");
            int cols = c && atoi(c) > 0 ? atoi(c) : 120;
            render(&v, cols, 0, 0, &b);
            if (b.data)
                fputs(b.data, out);
            ss_buf_free(&b);
            rc = fflush(out) == 0 ? 0 : 1;
        }
    }
    free(v.ranks);
    return rc;
}
