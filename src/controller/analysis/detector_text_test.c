/*
 * detector_text_test.c - unit tests for detector_text.c: the numbers of a
 * finding's evidence, the rule that an item which does not fit is left out
 * whole, and names escaped through base/json.h (a phase or sync point
 * named with invalid UTF-8 comes out as U+FFFD, so the evidence stays
 * valid JSON in the store and the API).
 */
#include "detectors_internal.h"

#include <math.h>

#include "stats.h"
#include "testing.h"

/* F's evidence holding the one number V under "x". */
static const char *one_num(ss_finding *f, double v)
{
    ss_buf ev = {0};
    ss__evidence_begin(&ev);
    ss__evidence_num(&ev, "x", v);
    ss__evidence_end(&ev, f);
    ss_buf_free(&ev);
    return f->evidence_json;
}

static void numbers(void)
{
    ss_finding f;
    CHECK_STR(one_num(&f, 3), "{\"x\":3}");
    CHECK_STR(one_num(&f, 2.5), "{\"x\":2.5}");
    CHECK_STR(one_num(&f, 12.30), "{\"x\":12.3}");
    CHECK_STR(one_num(&f, 0.1234), "{\"x\":0.123}");
    CHECK_STR(one_num(&f, -0.0001), "{\"x\":0}");
    CHECK_STR(one_num(&f, -41.25), "{\"x\":-41.25}");
    CHECK_STR(one_num(&f, 1e15), "{\"x\":1000000000000000}");
    CHECK_STR(one_num(&f, NAN), "{}");
    CHECK_STR(one_num(&f, INFINITY), "{}");

    ss_buf ev = {0};
    ss__evidence_begin(&ev);
    ss__evidence_int(&ev, "bytes", INT64_C(8589934592));
    ss__evidence_int(&ev, "rank", -1);
    ss__evidence_str(&ev, "memory", "rss");
    ss__evidence_end(&ev, &f);
    CHECK_STR(f.evidence_json,
              "{\"bytes\":8589934592,\"rank\":-1,\"memory\":\"rss\"}");
    ss_buf_free(&ev);
}

/* Durations as a person reads them: under a millisecond with two
 * significant digits, so that 0.04 ms is not "0.0". */
static void milliseconds(void)
{
    char b[32];
    CHECK_STR(ss__fmt_ms(b, sizeof b, 48.4), "48");
    CHECK_STR(ss__fmt_ms(b, sizeof b, 4.14), "4.1");
    CHECK_STR(ss__fmt_ms(b, sizeof b, 1.0), "1.0");
    CHECK_STR(ss__fmt_ms(b, sizeof b, 0.154), "0.15");
    CHECK_STR(ss__fmt_ms(b, sizeof b, 0.5), "0.5");
    CHECK_STR(ss__fmt_ms(b, sizeof b, 0.1), "0.1");
    CHECK_STR(ss__fmt_ms(b, sizeof b, 0.04), "0.04");
    CHECK_STR(ss__fmt_ms(b, sizeof b, 0.0123), "0.012");
    CHECK_STR(ss__fmt_ms(b, sizeof b, 0.00123), "0.0012");
    CHECK_STR(ss__fmt_ms(b, sizeof b, -0.25), "-0.25");
    CHECK_STR(ss__fmt_ms(b, sizeof b, 0), "0.0");
}

/* Items that would overflow ss_finding.evidence_json are left out whole;
 * a later, shorter one that fits still goes in. */
static void full_object_drops_whole_items(void)
{
    ss_finding f;
    ss_buf ev = {0};
    char key[16], value[200];
    memset(value, 'v', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    ss__evidence_begin(&ev);
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ss__evidence_str(&ev, key, value);
    }
    ss__evidence_int(&ev, "last", 7);
    ss__evidence_end(&ev, &f);
    size_t len = strlen(f.evidence_json);
    CHECK(len < sizeof f.evidence_json);
    CHECK(f.evidence_json[0] == '{' && f.evidence_json[len - 1] == '}');
    CHECK(strstr(f.evidence_json, "\"k3\":\"vvv") != NULL);
    /* each item is 207 bytes: the fifth would take the object past 1023 */
    CHECK(strstr(f.evidence_json, "\"k4\"") == NULL);
    CHECK(strstr(f.evidence_json, "\"k7\"") == NULL);
    CHECK(strstr(f.evidence_json, ",\"last\":7}") != NULL);
    ss_buf_free(&ev);
}

/* ---- names through the detectors ---- */

#define WORLD 4
enum { FWD = 0, SYNC = 1, N_NAMES = 2 };

typedef struct {
    int64_t phase[WORLD][N_NAMES], sync[WORLD][N_NAMES];
    ss_rank_step ranks[WORLD];
    ss_phase_stat phases[1];
    ss_sync_stat syncs[1];
    ss_step_view v;
} view;

/* A synchronized step where rank 2 computes 30 ms longer in "forward" and
 * so reaches the sync point 30 ms after the others. */
static void build(view *b, uint64_t step)
{
    memset(b, 0, sizeof *b);
    int64_t vals[WORLD], arrivals[WORLD], steps[WORLD];
    int32_t rk[WORLD];
    int64_t begin = (int64_t)step * 1000000000;
    for (int r = 0; r < WORLD; r++) {
        int64_t fwd = (r == 2 ? 40 : 10) * 1000000 + r * 1000;
        b->phase[r][FWD] = fwd;
        b->phase[r][SYNC] = b->sync[r][FWD] = SS_MISSING;
        b->sync[r][SYNC] = begin + fwd;
        ss_rank_step *rs = &b->ranks[r];
        rs->present = 1;
        rs->step_ns = 45 * 1000000;
        rs->rss_bytes = rs->device_bytes = SS_MISSING;
        rs->phase_ns = b->phase[r];
        rs->sync_arrival_ns = b->sync[r];
        vals[r] = fwd;
        arrivals[r] = begin + fwd;
        steps[r] = rs->step_ns;
        rk[r] = r;
    }
    ss_stat_compute(&b->v.step_time, steps, rk, WORLD);
    ss_stat_compute(&b->v.rss, NULL, NULL, 0);
    ss_stat_compute(&b->v.device, NULL, NULL, 0);
    b->phases[0].name = FWD;
    ss_stat_compute(&b->phases[0].stat, vals, rk, WORLD);
    b->syncs[0].name = SYNC;
    b->syncs[0].n = WORLD;
    b->syncs[0].worst_rank = 2;
    b->syncs[0].skew_ns = arrivals[2] - arrivals[0];
    b->syncs[0].late_ns = arrivals[2] - ss_median_i64(arrivals, WORLD);
    b->v.step = step;
    b->v.world_size = WORLD;
    b->v.n_present = WORLD;
    b->v.n_phases = 1;
    b->v.phases = b->phases;
    b->v.n_syncs = 1;
    b->v.syncs = b->syncs;
    b->v.n_names = N_NAMES;
    b->v.ranks = b->ranks;
}

static void on_finding(void *ctx, const ss_finding *f)
{
    *(ss_finding *)ctx = *f;
}

/* Names come from the ranks and may hold any byte but control
 * characters; the evidence must still be valid UTF-8 JSON. */
static void invalid_utf8_name_escaped(void)
{
    static const char *const names[N_NAMES] = {"forward", "sync\xff"};
    ss_finding last;
    memset(&last, 0, sizeof last);
    ss_sink sink = {&last, NULL, on_finding};
    ss_detectors *d = ss_detectors_create(NULL, WORLD, 0, &sink);
    REQUIRE(d);
    view b;
    for (uint64_t s = 0; s < 40; s++) {
        build(&b, s);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    ss_detectors_destroy(d);
    CHECK_STR(last.kind, "straggler");
    CHECK_EQ_INT(last.ranks[0], 2);
    CHECK(strstr(last.evidence_json, "\"sync\":\"sync\\ufffd\"") != NULL);
    CHECK(strchr(last.evidence_json, '\xff') == NULL);
    if (strstr(last.evidence_json, "\\ufffd") == NULL)
        fprintf(stderr, "    evidence: %s\n", last.evidence_json);
}

/* The clock error bound in words, and in evidence only when above 0. */
static void clock_bound_words_and_evidence(void)
{
    char buf[64];
    CHECK_STR(ss__fmt_clock_bound(buf, sizeof buf, 0), "");
    CHECK_STR(ss__fmt_clock_bound(buf, sizeof buf, 300000),
              " (clocks aligned \u00b1 0.3 ms)");
    CHECK_STR(ss__fmt_clock_bound(buf, sizeof buf, 12500000),
              " (clocks aligned \u00b1 12 ms)");
    CHECK_STR(ss__fmt_clock_bound(buf, sizeof buf, 40000),
              " (clocks aligned \u00b1 40 \u00b5s)");
    CHECK_STR(ss__fmt_clock_bound(buf, sizeof buf, 1),
              " (clocks aligned \u00b1 1 \u00b5s)");

    ss_finding f;
    ss_buf ev = {0};
    ss__evidence_begin(&ev);
    ss__evidence_clock_bound(&ev, 0, 1);
    ss__evidence_end(&ev, &f);
    CHECK_STR(f.evidence_json, "{}");
    ss__evidence_begin(&ev);
    ss__evidence_clock_bound(&ev, 300000, 0);
    ss__evidence_end(&ev, &f);
    CHECK_STR(f.evidence_json, "{\"clock_bound_ns\":300000}");
    ss__evidence_begin(&ev);
    ss__evidence_clock_bound(&ev, 300000, 1);
    ss__evidence_end(&ev, &f);
    CHECK_STR(f.evidence_json,
              "{\"clock_bound_ns\":300000,\"clock_uncertain\":1}");
    ss_buf_free(&ev);
}

TEST_LIST(TEST(clock_bound_words_and_evidence), TEST(numbers),
          TEST(milliseconds), TEST(full_object_drops_whole_items),
          TEST(invalid_utf8_name_escaped))
