/*
 * objects_test.c - unit tests for the step and finding objects (objects.c).
 *
 * The objects byte for byte as docs/api.md shows them: a step with its
 * phases and syncs ordered by name (also past the 64 names kept on the
 * stack), missing values as null, unknown name indexes as "?"; a finding
 * from memory equal to the same finding from its stored fields, with
 * escaping, no phase, evidence that is not an object, and text fields
 * that fill their arrays without a NUL.  That the stored steps and
 * findings read back as these objects is query_test's part.
 */
#include <stdlib.h>

#include "objects.h"
#include "testing.h"

#define MS 1000000LL

static void step_object(void)
{
    static const char *const names[] = {"sync", "zeta", "alpha"};
    ss_phase_stat phases[2] = {
        {1, {4 * MS, 5 * MS, 6 * MS, 6 * MS, 2, 3}},
        {2, {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING, SS_NO_RANK, 0}}};
    /* Self time: zeta holds a nested phase; alpha is not measured. */
    ss_stat self[2] = {
        {1 * MS, 2 * MS, 3 * MS, 3 * MS, 1, 3},
        {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING, SS_NO_RANK, 0}};
    ss_sync_stat syncs[2] = {{0, 2000, 1000, 1, 3}, {-1, 1500, 500, -1, 3}};
    uint32_t missing[2] = {1, 4};
    ss_step_view v = {
        .step = 9, .world_size = 5, .n_present = 3, .n_missing = 2,
        .missing_ranks = missing,
        .step_time = {10 * MS, 11500000, 12 * MS, 13 * MS, 0, 3},
        .rss = {1000, 1000, 1001, 1002, 2, 3},
        .device = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                   SS_NO_RANK, 0},
        .n_phases = 2, .phases = phases, .phase_self = self, .n_syncs = 2,
        .syncs = syncs, .n_names = 3};
    ss_buf b = {0};
    ss_obj_step(&b, &v, names);
    REQUIRE(!b.oom);
    CHECK_STR(b.data,
              "{\"step\":9,\"n_present\":3,\"missing_ranks\":[1,4],"
              "\"step_ms\":{\"min\":10.000,\"median\":11.500,\"p90\":12.000,"
              "\"max\":13.000,\"worst_rank\":0},"
              "\"phases\":{\"alpha\":{\"min\":null,\"median\":null,"
              "\"p90\":null,\"max\":null,\"worst_rank\":null,"
              "\"self\":null},"
              "\"zeta\":{\"min\":4.000,\"median\":5.000,\"p90\":6.000,"
              "\"max\":6.000,\"worst_rank\":2,\"self\":{"
              "\"median\":2.000,\"max\":3.000,\"worst_rank\":1}}},"
              "\"syncs\":{\"?\":{\"skew_ms\":0.002,\"late_ms\":0.001,"
              "\"worst_rank\":null},\"sync\":{\"skew_ms\":0.002,"
              "\"late_ms\":0.001,\"worst_rank\":1}},"
              "\"rss_bytes\":{\"median\":1000,\"max\":1002,\"worst_rank\":2},"
              "\"device_bytes\":{\"median\":null,\"max\":null,"
              "\"worst_rank\":null}}");
    ss_buf_free(&b);
}

/* 100 phases named p099 .. p000 come out p000 .. p099. */
static void step_object_many_names(void)
{
    enum { N = 100 };
    char text[N][8];
    const char *names[N];
    ss_phase_stat phases[N];
    for (int i = 0; i < N; i++) {
        snprintf(text[i], sizeof text[i], "p%03d", N - 1 - i);
        names[i] = text[i];
        phases[i] = (ss_phase_stat){i, {MS, MS, MS, MS, 0, 1}};
    }
    ss_step_view v = {.step = 1, .n_present = 1, .world_size = 1,
                      .step_time = {MS, MS, MS, MS, 0, 1},
                      .rss = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                              SS_NO_RANK, 0},
                      .device = {SS_MISSING, SS_MISSING, SS_MISSING,
                                 SS_MISSING, SS_NO_RANK, 0},
                      .n_phases = N, .phases = phases, .n_names = N};
    ss_buf b = {0};
    ss_obj_step(&b, &v, names);
    REQUIRE(!b.oom && b.data);
    const char *at = b.data;
    for (int i = 0; i < N; i++) {
        char key[16];
        snprintf(key, sizeof key, "\"p%03d\":", i);
        const char *next = strstr(at, key);
        CHECK(next != NULL);
        if (next)
            at = next;
    }
    ss_buf_free(&b);
}

static void finding_object(void)
{
    ss_finding f;
    memset(&f, 0, sizeof f);
    f.id = 3;
    f.severity = SS_CRITICAL;
    f.n_ranks = 2;
    f.ranks[0] = 2;
    f.ranks[1] = 5;
    snprintf(f.kind, sizeof f.kind, "straggler");
    snprintf(f.phase, sizeof f.phase, "forward");
    f.first_step = 10;
    f.last_step = 12;
    snprintf(f.evidence_json, sizeof f.evidence_json, "{\"late_ms\":2}");
    snprintf(f.message, sizeof f.message, "rank \"2\"\tslow\n");
    ss_buf mem = {0}, stored = {0};
    ss_obj_finding(&mem, &f);
    CHECK_STR(mem.data,
              "{\"id\":3,\"kind\":\"straggler\",\"severity\":\"critical\","
              "\"ranks\":[2,5],\"phase\":\"forward\",\"first_step\":10,"
              "\"last_step\":12,\"evidence\":{\"late_ms\":2},"
              "\"message\":\"rank \\\"2\\\"\\tslow\\n\"}");
    ss_obj_finding_fields fields = {
        .id = 3, .kind = "straggler", .severity = "critical",
        .ranks = (const int64_t[]){2, 5}, .n_ranks = 2, .phase = "forward", .first_step = 10,
        .last_step = 12, .evidence = "{\"late_ms\":2}",
        .message = "rank \"2\"\tslow\n"};
    ss_obj_finding_stored(&stored, &fields);
    CHECK_STR(stored.data, mem.data);
    ss_buf_free(&mem);
    ss_buf_free(&stored);

    /* no phase, no ranks, evidence that is not an object */
    f.severity = SS_WARNING;
    f.n_ranks = 0;
    f.phase[0] = '\0';
    snprintf(f.evidence_json, sizeof f.evidence_json, "[1]");
    ss_obj_finding(&mem, &f);
    CHECK(strstr(mem.data, "\"severity\":\"warning\",\"ranks\":[],"
                           "\"phase\":null,") != NULL);
    CHECK(strstr(mem.data, "\"evidence\":{},") != NULL);
    ss_buf_free(&mem);
}

/* Text fields that fill their arrays are read no further than the array. */
static void finding_object_unterminated(void)
{
    ss_finding f;
    memset(&f, 'x', sizeof f);
    f.id = 1;
    f.severity = SS_WARNING;
    f.n_ranks = 0;
    f.first_step = 1;
    f.last_step = 1;
    ss_buf b = {0};
    ss_obj_finding(&b, &f);
    REQUIRE(!b.oom && b.data);
    char kind[64];
    snprintf(kind, sizeof kind, "\"kind\":\"%.*s\",", (int)sizeof f.kind - 1,
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    CHECK(strstr(b.data, kind) != NULL);
    CHECK(strstr(b.data, "\"evidence\":{},") != NULL);
    ss_buf_free(&b);
}

TEST_LIST(TEST(step_object), TEST(step_object_many_names),
          TEST(finding_object), TEST(finding_object_unterminated))
