/*
 * wire_test.c - round trips and rejections of the wire protocol decoder.
 */
#include <math.h>
#include <stdio.h>
#include "testing.h"
#include "wire.h"

#include <stdint.h>
#include <string.h>

static const uint8_t k_token[WIRE_TOKEN_SIZE] = {1, 2, 3, 4, 5, 6, 7, 8,
                                                 9, 10, 11, 12, 13, 14, 15, 16};

static wire_hello make_hello(void)
{
    wire_hello h;
    memset(&h, 0, sizeof h);
    h.version = WIRE_VERSION;
    h.rank = 2;
    h.world_size = 4;
    h.local_rank = 2;
    h.pid = 4242;
    h.attempt = 1;
    memcpy(h.token, k_token, sizeof k_token);
    strcpy(h.run_id, "run-abc");
    strcpy(h.host, "node7");
    return h;
}

static wire_decoder ready_decoder(void)
{
    wire_decoder d;
    wire_decoder_init(&d, WIRE_FROM_RANK, k_token, "run-abc");
    return d;
}

/* Feeds BUF into D; returns the result of the first frame. */
static wire_result feed(wire_decoder *d, const uint8_t *buf, size_t len,
                        wire_frame *f, char *err)
{
    size_t used;
    return wire_decoder_next(d, buf, len, f, &used, err, 256);
}

static void hello_round_trip(void)
{
    uint8_t buf[512];
    wire_hello h = make_hello();
    size_t n = wire_encode_hello(buf, sizeof buf, &h);
    REQUIRE(n > WIRE_HEADER_SIZE);
    wire_decoder d = ready_decoder();
    wire_frame f;
    char err[256];
    size_t used;
    /* Every prefix short of the whole frame asks for more. */
    for (size_t k = 0; k < n; k++)
        CHECK_EQ_INT(wire_decoder_next(&d, buf, k, &f, &used, err, sizeof err),
                     WIRE_NEED_MORE);
    CHECK_EQ_INT(wire_decoder_next(&d, buf, n, &f, &used, err, sizeof err),
                 WIRE_OK);
    CHECK_EQ_INT(used, n);
    CHECK_EQ_INT(f.type, WIRE_HELLO);
    CHECK_EQ_INT(f.u.hello.rank, 2);
    CHECK_EQ_INT(f.u.hello.world_size, 4);
    CHECK_EQ_INT(f.u.hello.pid, 4242);
    CHECK_EQ_INT(f.u.hello.attempt, 1);
    CHECK_STR(f.u.hello.host, "node7");
    CHECK_STR(f.u.hello.run_id, "run-abc");
}

static void rejects_wrong_token(void)
{
    uint8_t buf[512];
    wire_hello h = make_hello();
    h.token[5] ^= 0xff;
    size_t n = wire_encode_hello(buf, sizeof buf, &h);
    wire_decoder d = ready_decoder();
    wire_frame f;
    char err[256];
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "wrong token") != NULL);
}

static void rejects_unknown_version(void)
{
    uint8_t buf[512];
    wire_hello h = make_hello();
    h.version = 99;
    size_t n = wire_encode_hello(buf, sizeof buf, &h);
    wire_decoder d = ready_decoder();
    wire_frame f;
    char err[256];
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "version 99") != NULL);
}

static void rejects_other_run_and_bad_rank(void)
{
    uint8_t buf[512];
    wire_hello h = make_hello();
    strcpy(h.run_id, "other");
    size_t n = wire_encode_hello(buf, sizeof buf, &h);
    wire_decoder d = ready_decoder();
    wire_frame f;
    char err[256];
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "run 'other'") != NULL);

    h = make_hello();
    h.rank = 4;
    n = wire_encode_hello(buf, sizeof buf, &h);
    d = ready_decoder();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "outside world size") != NULL);
}

static void rejects_garbage_and_oversize(void)
{
    wire_decoder d = ready_decoder();
    wire_frame f;
    char err[256];
    const uint8_t http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK_EQ_INT(feed(&d, http, sizeof http - 1, &f, err), WIRE_ERROR);
    CHECK(err[0] != '\0');

    uint8_t big[8] = {0xff, 0xff, 0xff, 0x7f, WIRE_HELLO, 0, 0, 0};
    d = ready_decoder();
    CHECK_EQ_INT(feed(&d, big, sizeof big, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "exceeds") != NULL);
}

static void requires_hello_first(void)
{
    uint8_t buf[64];
    wire_bye b = {7};
    size_t n = wire_encode_bye(buf, sizeof buf, &b);
    wire_decoder d = ready_decoder();
    wire_frame f;
    char err[256];
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "expected HELLO") != NULL);
}

/* A handshaken decoder with names 1 ("forward") and 2 ("allreduce"). */
static wire_decoder handshaken(void)
{
    uint8_t buf[512];
    wire_decoder d = ready_decoder();
    wire_frame f;
    char err[256];
    wire_hello h = make_hello();
    size_t n = wire_encode_hello(buf, sizeof buf, &h);
    feed(&d, buf, n, &f, err);
    wire_name nm = {1, "forward"};
    n = wire_encode_name(buf, sizeof buf, &nm);
    feed(&d, buf, n, &f, err);
    wire_name nm2 = {2, "allreduce"};
    n = wire_encode_name(buf, sizeof buf, &nm2);
    feed(&d, buf, n, &f, err);
    return d;
}

static void step_round_trip_and_order(void)
{
    static wire_step s, back;
    memset(&s, 0, sizeof s);
    s.step = 10;
    s.begin_ns = 1000;
    s.end_ns = 51000;
    s.rss_bytes = 123456789;
    s.flags = WIRE_STEP_HAS_RSS;
    s.n_phases = 1;
    s.phases[0] = (wire_phase){1, 2, 40000, 3000, 0};
    s.n_syncs = 1;
    s.syncs[0] = (wire_sync){2, 45000};
    s.n_metrics = 1;
    s.metrics[0] = (wire_metric){1, 0.25};
    uint8_t buf[WIRE_STEP_FRAME_MAX];
    size_t n = wire_encode_step(buf, sizeof buf, &s);
    REQUIRE(n > 0);
    wire_decoder d = handshaken();
    CHECK_EQ_INT(d.frames, 3);
    wire_frame f;
    char err[256];
    REQUIRE(feed(&d, buf, n, &f, err) == WIRE_OK);
    back = f.u.step;
    CHECK_EQ_INT(back.step, 10);
    CHECK_EQ_INT(back.end_ns, 51000);
    CHECK_EQ_INT(back.rss_bytes, 123456789);
    CHECK_EQ_INT(back.phases[0].total_ns, 40000);
    CHECK_EQ_INT(back.phases[0].count, 2);
    CHECK_EQ_INT(back.phases[0].first_begin_ns, 3000);
    CHECK_EQ_INT(back.syncs[0].arrival_ns, 45000);
    CHECK(back.metrics[0].value == 0.25);
    /* The same step again is out of order. */
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "does not follow") != NULL);
}

static void step_rejects_undeclared_and_bad_times(void)
{
    static wire_step s;
    memset(&s, 0, sizeof s);
    s.step = 1;
    s.begin_ns = 10;
    s.end_ns = 20;
    s.n_phases = 1;
    s.phases[0] = (wire_phase){9, 1, 5, 10, 0};
    uint8_t buf[WIRE_STEP_FRAME_MAX];
    size_t n = wire_encode_step(buf, sizeof buf, &s);
    wire_decoder d = handshaken();
    wire_frame f;
    char err[256];
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "undeclared name id 9") != NULL);

    s.phases[0].name_id = 1;
    n = wire_encode_step(buf, sizeof buf, &s);
    /* Patch end_ns (offset 8 header + 16) below begin. */
    memset(buf + WIRE_HEADER_SIZE + 16, 0, 8);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "ends before") != NULL);

    /* A phase's first begin must not be negative. */
    s.phases[0].first_begin_ns = -1;
    n = wire_encode_step(buf, sizeof buf, &s);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "phase begin out of range") != NULL);
}

/* Writes V little-endian into P[0..N). */
static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void step_self_time_optional(void)
{
    /* A record laid out as recorders without self time write it (phase
     * items of 24 bytes, no flag), built byte by byte: it is accepted and
     * says it carries no self time. */
    uint8_t old[WIRE_HEADER_SIZE + 44 + 24];
    memset(old, 0, sizeof old);
    put_le(old, sizeof old - WIRE_HEADER_SIZE, 4);
    old[4] = WIRE_STEP;
    uint8_t *p = old + WIRE_HEADER_SIZE;
    put_le(p, 3, 8);          /* step */
    put_le(p + 8, 100, 8);    /* begin */
    put_le(p + 16, 900, 8);   /* end */
    p[41] = 1;                /* one phase */
    put_le(p + 44, 1, 4);     /* name id */
    put_le(p + 48, 1, 4);     /* count */
    put_le(p + 52, 700, 8);   /* total */
    put_le(p + 60, 150, 8);   /* first begin */
    wire_decoder d = handshaken();
    wire_frame f;
    char err[256];
    REQUIRE(feed(&d, old, sizeof old, &f, err) == WIRE_OK);
    CHECK_EQ_INT(f.u.step.flags & WIRE_STEP_HAS_SELF, 0);
    CHECK_EQ_INT(f.u.step.phases[0].total_ns, 700);
    CHECK_EQ_INT(f.u.step.phases[0].first_begin_ns, 150);

    /* With the flag every phase item carries its self time. */
    static wire_step s;
    memset(&s, 0, sizeof s);
    s.step = 4;
    s.begin_ns = 1000;
    s.end_ns = 90000;
    s.flags = WIRE_STEP_HAS_SELF;
    s.n_phases = 2;
    s.phases[0] = (wire_phase){1, 1, 80000, 1000, 40000};
    s.phases[1] = (wire_phase){2, 1, 40000, 41000, 40000};
    uint8_t buf[WIRE_STEP_FRAME_MAX];
    size_t n = wire_encode_step(buf, sizeof buf, &s);
    CHECK_EQ_INT(n, WIRE_HEADER_SIZE + 44 + 2 * 32);
    REQUIRE(feed(&d, buf, n, &f, err) == WIRE_OK);
    CHECK_EQ_INT(f.u.step.flags, WIRE_STEP_HAS_SELF);
    CHECK_EQ_INT(f.u.step.phases[0].self_ns, 40000);
    CHECK_EQ_INT(f.u.step.phases[1].self_ns, 40000);
    CHECK_EQ_INT(f.u.step.phases[1].total_ns, 40000);

    /* Self time above the total is refused, by encoder and decoder. */
    s.step = 5;
    s.phases[1].self_ns = 40001;
    CHECK_EQ_INT(wire_encode_step(buf, sizeof buf, &s), 0);
    s.phases[1].self_ns = 40000;
    n = wire_encode_step(buf, sizeof buf, &s);
    put_le(buf + n - 8, 40001, 8); /* the last item's self time */
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "self time exceeds") != NULL);
}

static void status_round_trip_and_rules(void)
{
    uint8_t buf[64];
    wire_status st = {12, 1, 987654321, 0, 0, 0};
    size_t n = wire_encode_status(buf, sizeof buf, &st);
    CHECK_EQ_INT(n, WIRE_STATUS_FRAME_SIZE);
    wire_decoder d = handshaken();
    wire_frame f;
    char err[256];
    REQUIRE(feed(&d, buf, n, &f, err) == WIRE_OK);
    CHECK_EQ_INT(f.type, WIRE_STATUS);
    CHECK_EQ_INT(f.u.status.step, 12);
    CHECK_EQ_INT(f.u.status.name_id, 1);
    CHECK_EQ_INT(f.u.status.since_ns, 987654321);
    CHECK_STR(wire_type_name(WIRE_STATUS), "STATUS");

    /* No step and no phase is valid; the step need not follow STEPs. */
    st = (wire_status){WIRE_NO_STEP, 0, 0, 0, 0, 0};
    n = wire_encode_status(buf, sizeof buf, &st);
    REQUIRE(feed(&d, buf, n, &f, err) == WIRE_OK);
    CHECK(f.u.status.step == WIRE_NO_STEP);
    CHECK_EQ_INT(f.u.status.name_id, 0);

    /* A name must be declared first. */
    st = (wire_status){3, 9, 5, 0, 0, 0};
    n = wire_encode_status(buf, sizeof buf, &st);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "undeclared name id 9") != NULL);

    /* A negative time, a truncated payload, the wrong direction. */
    st = (wire_status){3, 1, 5, 0, 0, 0};
    n = wire_encode_status(buf, sizeof buf, &st);
    memset(buf + n - 8, 0xff, 8);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "time out of range") != NULL);

    n = wire_encode_status(buf, sizeof buf, &st);
    buf[0] = (uint8_t)(buf[0] - 4);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n - 4, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "STATUS is truncated") != NULL);

    n = wire_encode_status(buf, sizeof buf, &st);
    wire_decoder_init(&d, WIRE_FROM_CONTROLLER, NULL, NULL);
    d.handshaken = 1;
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "unexpected STATUS") != NULL);

    /* The encoder refuses what the decoder would. */
    st = (wire_status){1, WIRE_MAX_NAME_ID + 1, 0, 0, 0, 0};
    CHECK_EQ_INT(wire_encode_status(buf, sizeof buf, &st), 0);
    st = (wire_status){1, 1, -5, 0, 0, 0};
    CHECK_EQ_INT(wire_encode_status(buf, sizeof buf, &st), 0);
}

/* The optional collective tail of STATUS: round trip, and the decoder's
 * rules for it (declared name, number >= 1, known flags, exact length). */
static void status_collective(void)
{
    uint8_t buf[64];
    wire_status st = {7, 1, 100, 2, 1203, WIRE_STATUS_COLL_ACTIVE};
    size_t n = wire_encode_status(buf, sizeof buf, &st);
    CHECK_EQ_INT(n, WIRE_STATUS_COLL_FRAME_SIZE);
    wire_decoder d = handshaken();
    wire_frame f;
    char err[256];
    REQUIRE(feed(&d, buf, n, &f, err) == WIRE_OK);
    CHECK_EQ_INT(f.u.status.coll_name_id, 2);
    CHECK_EQ_INT(f.u.status.coll_seq, 1203);
    CHECK_EQ_INT(f.u.status.coll_flags, WIRE_STATUS_COLL_ACTIVE);

    /* Without the tail the fields read as "no collective". */
    st = (wire_status){7, 1, 100, 0, 0, 0};
    n = wire_encode_status(buf, sizeof buf, &st);
    CHECK_EQ_INT(n, WIRE_STATUS_FRAME_SIZE);
    REQUIRE(feed(&d, buf, n, &f, err) == WIRE_OK);
    CHECK_EQ_INT(f.u.status.coll_name_id, 0);
    CHECK_EQ_INT(f.u.status.coll_seq, 0);

    /* Undeclared kind, number 0, unknown flags, a partial tail. */
    st = (wire_status){7, 1, 100, 9, 5, 0};
    n = wire_encode_status(buf, sizeof buf, &st);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "collective uses undeclared name id 9") != NULL);

    st = (wire_status){7, 1, 100, 2, 5, 0};
    n = wire_encode_status(buf, sizeof buf, &st);
    put_le(buf + n - 9, 0, 8); /* the number */
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "collective number 0") != NULL);

    n = wire_encode_status(buf, sizeof buf, &st);
    buf[n - 1] = 0x2;
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "unknown collective flags 0x2") != NULL);

    n = wire_encode_status(buf, sizeof buf, &st);
    buf[0] = (uint8_t)(buf[0] - 1);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n - 1, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "STATUS collective is truncated") != NULL);

    /* The encoder refuses what the decoder would. */
    st = (wire_status){7, 1, 100, 2, 0, 0};
    CHECK_EQ_INT(wire_encode_status(buf, sizeof buf, &st), 0);
    st = (wire_status){7, 1, 100, 0, 3, 0};
    CHECK_EQ_INT(wire_encode_status(buf, sizeof buf, &st), 0);
    st = (wire_status){7, 1, 100, 2, 3, 0x4};
    CHECK_EQ_INT(wire_encode_status(buf, sizeof buf, &st), 0);
}

static void resumed_round_trip_and_rules(void)
{
    uint8_t buf[64];
    wire_resumed rs = {41, 123456789};
    size_t n = wire_encode_resumed(buf, sizeof buf, &rs);
    CHECK_EQ_INT(n, WIRE_HEADER_SIZE + 16);
    wire_decoder d = handshaken();
    wire_frame f;
    char err[256];
    REQUIRE(feed(&d, buf, n, &f, err) == WIRE_OK);
    CHECK_EQ_INT(f.type, WIRE_RESUMED);
    CHECK_EQ_INT(f.u.resumed.step, 41);
    CHECK_EQ_INT(f.u.resumed.t_ns, 123456789);
    CHECK_STR(wire_type_name(WIRE_RESUMED), "RESUMED");

    /* A step beyond INT64_MAX, a negative time, a truncated payload, the
     * wrong direction: each refused with its reason. */
    n = wire_encode_resumed(buf, sizeof buf, &rs);
    memset(buf + WIRE_HEADER_SIZE, 0xff, 8);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "RESUMED step out of range") != NULL);
    n = wire_encode_resumed(buf, sizeof buf, &rs);
    memset(buf + n - 8, 0xff, 8);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "RESUMED time out of range") != NULL);
    n = wire_encode_resumed(buf, sizeof buf, &rs);
    buf[0] = (uint8_t)(buf[0] - 4);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n - 4, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "RESUMED is truncated") != NULL);
    n = wire_encode_resumed(buf, sizeof buf, &rs);
    wire_decoder_init(&d, WIRE_FROM_CONTROLLER, NULL, NULL);
    d.handshaken = 1;
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "unexpected RESUMED") != NULL);

    /* The encoder refuses what the decoder would. */
    rs = (wire_resumed){(uint64_t)INT64_MAX + 1, 0};
    CHECK_EQ_INT(wire_encode_resumed(buf, sizeof buf, &rs), 0);
    rs = (wire_resumed){1, -1};
    CHECK_EQ_INT(wire_encode_resumed(buf, sizeof buf, &rs), 0);
}

static void rejects_trailing_bytes_and_unknown_type(void)
{
    uint8_t buf[64];
    wire_bye b = {3};
    size_t n = wire_encode_bye(buf, sizeof buf, &b);
    buf[0] = (uint8_t)(buf[0] + 1); /* claim one more payload byte */
    buf[n] = 0;
    wire_decoder d = handshaken();
    wire_frame f;
    char err[256];
    CHECK_EQ_INT(feed(&d, buf, n + 1, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "trailing") != NULL);

    uint8_t unk[8] = {0, 0, 0, 0, 77, 0, 0, 0};
    d = handshaken();
    CHECK_EQ_INT(feed(&d, unk, sizeof unk, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "unknown frame type 77") != NULL);
}

static void names_and_counters_rules(void)
{
    uint8_t buf[128];
    wire_decoder d = handshaken();
    wire_frame f;
    char err[256];
    wire_name dup = {1, "again"};
    size_t n = wire_encode_name(buf, sizeof buf, &dup);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "declared twice") != NULL);

    d = handshaken();
    wire_counters c = {10, 2, 0, 0};
    n = wire_encode_counters(buf, sizeof buf, &c);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    c.dropped_events = 5;
    n = wire_encode_counters(buf, sizeof buf, &c);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "backwards") != NULL);
}

static void recorder_side_welcome_reject(void)
{
    uint8_t buf[512];
    wire_decoder d;
    wire_decoder_init(&d, WIRE_FROM_CONTROLLER, NULL, NULL);
    wire_reject rj = {1, "wrong token"};
    size_t n = wire_encode_reject(buf, sizeof buf, &rj);
    wire_frame f;
    char err[256];
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK_STR(f.u.reject.reason, "wrong token");
    wire_welcome w = {WIRE_VERSION};
    n = wire_encode_welcome(buf, sizeof buf, &w);
    wire_decoder_init(&d, WIRE_FROM_CONTROLLER, NULL, NULL);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK(d.handshaken);
}

/* A recorder-side decoder past WELCOME. */
static wire_decoder welcomed(void)
{
    uint8_t buf[64];
    wire_decoder d;
    wire_decoder_init(&d, WIRE_FROM_CONTROLLER, NULL, NULL);
    wire_welcome w = {WIRE_VERSION};
    size_t n = wire_encode_welcome(buf, sizeof buf, &w);
    wire_frame f;
    char err[256];
    feed(&d, buf, n, &f, err);
    return d;
}

static void command_round_trip_and_rules(void)
{
    uint8_t buf[512];
    wire_frame f;
    char err[256];
    wire_command c = {7, WIRE_COMMAND_PROFILE, 2000, "/tmp/prof"};
    size_t n = wire_encode_command(buf, sizeof buf, &c);
    REQUIRE(n == WIRE_HEADER_SIZE + 12 + 1 + strlen(c.dir));
    wire_decoder d = welcomed();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK_EQ_INT(f.type, WIRE_COMMAND);
    CHECK_EQ_INT(f.u.command.request_id, 7);
    CHECK_EQ_INT(f.u.command.kind, WIRE_COMMAND_PROFILE);
    CHECK_EQ_INT(f.u.command.duration_ms, 2000);
    CHECK_STR(f.u.command.dir, "/tmp/prof");
    CHECK_STR(wire_type_name(WIRE_COMMAND), "COMMAND");
    CHECK_STR(wire_type_name(10), "RESUMED");
    CHECK_STR(wire_type_name(14), "VALUES");
    CHECK_STR(wire_type_name(15), "LABELS");
    CHECK_STR(wire_type_name(16), "UNKNOWN");

    /* Only the controller sends it, and only after WELCOME. */
    wire_decoder r = handshaken();
    CHECK_EQ_INT(feed(&r, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "unexpected COMMAND") != NULL);
    wire_decoder fresh;
    wire_decoder_init(&fresh, WIRE_FROM_CONTROLLER, NULL, NULL);
    CHECK_EQ_INT(feed(&fresh, buf, n, &f, err), WIRE_ERROR);

    /* The encoder refuses what the decoder would. */
    wire_command bad = c;
    bad.request_id = 0;
    CHECK_EQ_INT(wire_encode_command(buf, sizeof buf, &bad), 0);
    bad = c;
    bad.duration_ms = WIRE_MAX_PROFILE_MS + 1;
    CHECK_EQ_INT(wire_encode_command(buf, sizeof buf, &bad), 0);
    bad = c;
    strcpy(bad.dir, "relative");
    CHECK_EQ_INT(wire_encode_command(buf, sizeof buf, &bad), 0);

    /* Hand-made violations: unknown kind, reserved bits, zero duration,
     * a relative directory, a truncated payload. */
    static const struct {
        size_t at;
        uint8_t value;
        const char *why;
    } cases[] = {
        {WIRE_HEADER_SIZE + 4, 9, "unknown kind 9"},
        {WIRE_HEADER_SIZE + 5, 1, "reserved"},
        {WIRE_HEADER_SIZE + 7, 1, "reserved"},
        {WIRE_HEADER_SIZE + 13, 'x', "not absolute"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = wire_encode_command(buf, sizeof buf, &c);
        buf[cases[i].at] = cases[i].value;
        d = welcomed();
        CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
        CHECK(strstr(err, cases[i].why) != NULL);
    }
    n = wire_encode_command(buf, sizeof buf, &c);
    memset(buf + WIRE_HEADER_SIZE + 8, 0, 4); /* duration 0 */
    d = welcomed();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "duration 0 ms") != NULL);
    n = wire_encode_command(buf, sizeof buf, &c);
    buf[0] = 10; /* payload cut inside the directory */
    d = welcomed();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "truncated") != NULL);
}

static void features_and_profile_done(void)
{
    uint8_t buf[512];
    wire_frame f;
    char err[256];
    wire_features ft = {WIRE_FEATURE_PROFILE};
    size_t n = wire_encode_features(buf, sizeof buf, &ft);
    wire_decoder d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK_EQ_INT(f.u.features.bits, WIRE_FEATURE_PROFILE);
    buf[WIRE_HEADER_SIZE] = 3; /* an unknown bit */
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "unknown bits") != NULL);
    ft.bits = 2;
    CHECK_EQ_INT(wire_encode_features(buf, sizeof buf, &ft), 0);

    wire_profile_done ok = {7, WIRE_PROFILE_OK, 123456789,
                            "/tmp/prof/rank1.json"};
    n = wire_encode_profile_done(buf, sizeof buf, &ok);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK_EQ_INT(f.u.profile_done.request_id, 7);
    CHECK_EQ_INT(f.u.profile_done.status, WIRE_PROFILE_OK);
    CHECK(f.u.profile_done.marker_ns == 123456789);
    CHECK_STR(f.u.profile_done.text, "/tmp/prof/rank1.json");
    /* The recorder side refuses it. */
    wire_decoder r = welcomed();
    CHECK_EQ_INT(feed(&r, buf, n, &f, err), WIRE_ERROR);

    wire_profile_done no = {8, WIRE_PROFILE_FAILED, 0,
                            "torch.profiler is not available"};
    n = wire_encode_profile_done(buf, sizeof buf, &no);
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK_STR(f.u.profile_done.text, "torch.profiler is not available");

    buf[WIRE_HEADER_SIZE + 4] = 2; /* unknown status */
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "unknown status") != NULL);
    /* A trace path must be absolute; a reason may be any text. */
    wire_profile_done rel = ok;
    strcpy(rel.text, "rank1.json");
    CHECK_EQ_INT(wire_encode_profile_done(buf, sizeof buf, &rel), 0);
    n = wire_encode_profile_done(buf, sizeof buf, &no);
    buf[WIRE_HEADER_SIZE + 4] = WIRE_PROFILE_OK; /* "ok" with a reason */
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "not absolute") != NULL);
    n = wire_encode_profile_done(buf, sizeof buf, &ok);
    buf[WIRE_HEADER_SIZE + 12] = 0x80; /* marker < 0 */
    d = handshaken();
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "marker out of range") != NULL);
}

static void token_hex(void)
{
    char hex[2 * WIRE_TOKEN_SIZE + 1];
    uint8_t back[WIRE_TOKEN_SIZE];
    wire_token_format(k_token, hex);
    CHECK_STR(hex, "0102030405060708090a0b0c0d0e0f10");
    CHECK_EQ_INT(wire_token_parse(hex, back), 0);
    CHECK(memcmp(back, k_token, WIRE_TOKEN_SIZE) == 0);
    CHECK_EQ_INT(wire_token_parse("xyz", back), -1);
    hex[3] = 'g';
    CHECK_EQ_INT(wire_token_parse(hex, back), -1);
}

/* A minimal STEP frame of STEP (no items) into BUF; returns its size. */
static size_t plain_step(uint8_t *buf, size_t cap, uint64_t step)
{
    static wire_step s;
    memset(&s, 0, sizeof s);
    s.step = step;
    s.begin_ns = 10;
    s.end_ns = 20;
    return wire_encode_step(buf, cap, &s);
}

static void values_round_trip_keep_nan_and_inf(void)
{
    static uint8_t buf[WIRE_VALUES_FRAME_SIZE(WIRE_MAX_VALUES) + 8];
    static wire_frame f;
    char err[256];
    double v[5] = {1.5, NAN, INFINITY, -INFINITY, -0.0};
    uint64_t payload_nan = 0x7ff8000000000abcull; /* a NaN with a payload */
    memcpy(&v[1], &payload_nan, 8);
    size_t n = wire_encode_values(buf, sizeof buf, 7, 1, v, 5, 3);
    REQUIRE(n == WIRE_VALUES_FRAME_SIZE(5));
    wire_decoder d = handshaken();
    REQUIRE(feed(&d, buf, n, &f, err) == WIRE_OK);
    CHECK_EQ_INT(f.type, WIRE_VALUES);
    CHECK_EQ_INT(f.u.values.step, 7);
    CHECK_EQ_INT(f.u.values.name_id, 1);
    CHECK_EQ_INT(f.u.values.n, 5);
    CHECK_EQ_INT(f.u.values.truncated, 3);
    CHECK(memcmp(f.u.values.v, v, sizeof v) == 0); /* bit for bit */
    /* a second name of the same step, then its STEP */
    n = wire_encode_values(buf, sizeof buf, 7, 2, v, 0, 0);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK_EQ_INT(f.u.values.n, 0);
    n = plain_step(buf, sizeof buf, 7);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    /* the same name again in the next step is fine */
    n = wire_encode_values(buf, sizeof buf, 8, 1, v, 1, 0);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    /* a full vector fits in a frame; one more element does not encode */
    static double big[WIRE_MAX_VALUES + 1];
    CHECK(wire_encode_values(buf, sizeof buf, 8, 2, big, WIRE_MAX_VALUES,
                             0) > 0);
    CHECK_EQ_INT(wire_encode_values(buf, sizeof buf, 8, 2, big,
                                    WIRE_MAX_VALUES + 1, 0), 0);
    CHECK_EQ_INT(wire_encode_values(buf, sizeof buf, 8, 0, big, 1, 0), 0);
}

static void values_rules(void)
{
    static uint8_t buf[WIRE_VALUES_FRAME_SIZE(WIRE_MAX_VALUES) + 8];
    static wire_frame f;
    char err[256];
    double v[2] = {1, 2};
    size_t n;
    wire_decoder d;

    /* an undeclared name */
    d = handshaken();
    n = wire_encode_values(buf, sizeof buf, 1, 9, v, 2, 0);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "undeclared") != NULL);
    /* the same name twice in a step */
    d = handshaken();
    n = wire_encode_values(buf, sizeof buf, 1, 1, v, 2, 0);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "twice") != NULL);
    /* values of two steps without the STEP between them */
    d = handshaken();
    n = wire_encode_values(buf, sizeof buf, 1, 1, v, 2, 0);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    n = wire_encode_values(buf, sizeof buf, 2, 2, v, 2, 0);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "before the STEP") != NULL);
    /* a STEP of another step after them */
    d = handshaken();
    n = wire_encode_values(buf, sizeof buf, 3, 1, v, 2, 0);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    n = plain_step(buf, sizeof buf, 4);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "follows VALUES") != NULL);
    /* BYE with values waiting */
    d = handshaken();
    n = wire_encode_values(buf, sizeof buf, 3, 1, v, 2, 0);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    wire_bye bye = {3};
    n = wire_encode_bye(buf, sizeof buf, &bye);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    /* values of a step already sent */
    d = handshaken();
    n = plain_step(buf, sizeof buf, 5);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    n = wire_encode_values(buf, sizeof buf, 5, 1, v, 2, 0);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "does not follow") != NULL);
    /* a count that the payload does not hold, either way */
    d = handshaken();
    n = wire_encode_values(buf, sizeof buf, 1, 1, v, 2, 0);
    buf[WIRE_HEADER_SIZE + 12] = 3; /* n = 3, payload holds 2 */
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "does not hold") != NULL);
    d = handshaken();
    n = wire_encode_values(buf, sizeof buf, 1, 1, v, 2, 0);
    put_le(buf + WIRE_HEADER_SIZE + 12, 0x7fffffff, 4);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    /* truncated */
    d = handshaken();
    n = wire_encode_values(buf, sizeof buf, 1, 1, v, 2, 0);
    put_le(buf, 10, 4);
    CHECK_EQ_INT(feed(&d, buf, WIRE_HEADER_SIZE + 10, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "truncated") != NULL);
    /* no step number */
    d = handshaken();
    n = wire_encode_values(buf, sizeof buf, 1, 1, v, 2, 0);
    put_le(buf + WIRE_HEADER_SIZE, WIRE_NO_STEP, 8);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    /* more than a step may carry: 65 full vectors */
    wire_decoder big = handshaken();
    static double full[WIRE_MAX_VALUES];
    char name[16];
    wire_result rc = WIRE_OK;
    for (unsigned id = 3; id < 3 + 65 && rc == WIRE_OK; id++) {
        snprintf(name, sizeof name, "v%u", id);
        wire_name nm;
        nm.name_id = id;
        snprintf(nm.name, sizeof nm.name, "%s", name);
        n = wire_encode_name(buf, sizeof buf, &nm);
        REQUIRE(feed(&big, buf, n, &f, err) == WIRE_OK);
        n = wire_encode_values(buf, sizeof buf, 1, id, full, WIRE_MAX_VALUES,
                               0);
        rc = feed(&big, buf, n, &f, err);
    }
    CHECK_EQ_INT(rc, WIRE_ERROR);
    CHECK(strstr(err, "exceed") != NULL);
    /* the controller never sends VALUES */
    wire_decoder r = welcomed();
    n = wire_encode_values(buf, sizeof buf, 1, 1, v, 2, 0);
    CHECK_EQ_INT(feed(&r, buf, n, &f, err), WIRE_ERROR);
}

static void labels_chunks_in_order(void)
{
    static uint8_t buf[WIRE_HEADER_SIZE + WIRE_MAX_PAYLOAD];
    static wire_frame f;
    char err[256];
    const char *a[3] = {"layer.0", "", "layer 2 \xc3\xa9"};
    wire_decoder d = handshaken();
    size_t n = wire_encode_labels(buf, sizeof buf, 1, 5, 0, a, 3);
    REQUIRE(n > 0);
    REQUIRE(feed(&d, buf, n, &f, err) == WIRE_OK);
    CHECK_EQ_INT(f.type, WIRE_LABELS);
    CHECK_EQ_INT(f.u.labels.total, 5);
    CHECK_EQ_INT(f.u.labels.first, 0);
    CHECK_EQ_INT(f.u.labels.count, 3);
    CHECK_STR(f.u.labels.text + f.u.labels.off[0], "layer.0");
    CHECK_STR(f.u.labels.text + f.u.labels.off[1], "");
    CHECK_STR(f.u.labels.text + f.u.labels.off[2], a[2]);
    /* another frame before the set is complete */
    wire_decoder e = d;
    n = wire_encode_labels(buf, sizeof buf, 2, 1, 0, a, 1);
    CHECK_EQ_INT(feed(&e, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "out of order") != NULL);
    /* a gap */
    e = d;
    n = wire_encode_labels(buf, sizeof buf, 1, 5, 4, a, 1);
    CHECK_EQ_INT(feed(&e, buf, n, &f, err), WIRE_ERROR);
    /* the rest completes it; a new set may follow */
    n = wire_encode_labels(buf, sizeof buf, 1, 5, 3, a, 2);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK_EQ_INT(f.u.labels.first, 3);
    n = wire_encode_labels(buf, sizeof buf, 2, 1, 0, a, 1);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    /* a chunk that does not start the set when none is open */
    n = wire_encode_labels(buf, sizeof buf, 2, 3, 1, a, 1);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    /* bad ranges and labels are refused by the encoder */
    CHECK_EQ_INT(wire_encode_labels(buf, sizeof buf, 1, 2, 1, a, 2), 0);
    CHECK_EQ_INT(wire_encode_labels(buf, sizeof buf, 1, 0, 0, a, 1), 0);
    const char *bad[1] = {"tab\there"};
    CHECK_EQ_INT(wire_encode_labels(buf, sizeof buf, 1, 1, 0, bad, 1), 0);
    /* and by the decoder: a control byte, a count past the total */
    d = handshaken();
    n = wire_encode_labels(buf, sizeof buf, 1, 1, 0, a, 1);
    buf[WIRE_HEADER_SIZE + 13] = '\n';
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "malformed") != NULL);
    d = handshaken();
    n = wire_encode_labels(buf, sizeof buf, 1, 1, 0, a, 1);
    put_le(buf + WIRE_HEADER_SIZE + 8, 2, 2);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "out of range") != NULL);
    d = handshaken();
    n = wire_encode_labels(buf, sizeof buf, 1, 1, 0, a, 1);
    buf[WIRE_HEADER_SIZE + 10] = 1; /* reserved */
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
}

static void counters_vector_tail_is_optional(void)
{
    uint8_t buf[128];
    wire_frame f;
    char err[256];
    wire_decoder d = handshaken();
    /* the 16-byte form of older recorders */
    wire_counters c = {1, 2, 0, 0};
    size_t n = wire_encode_counters(buf, sizeof buf, &c);
    CHECK_EQ_INT(n, WIRE_HEADER_SIZE + 16);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK_EQ_INT(f.u.counters.dropped_vectors, 0);
    c.dropped_vectors = 3;
    c.truncated_values = 4;
    n = wire_encode_counters(buf, sizeof buf, &c);
    CHECK_EQ_INT(n, WIRE_HEADER_SIZE + 32);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_OK);
    CHECK_EQ_INT(f.u.counters.dropped_vectors, 3);
    CHECK_EQ_INT(f.u.counters.truncated_values, 4);
    c.truncated_values = 1;
    n = wire_encode_counters(buf, sizeof buf, &c);
    CHECK_EQ_INT(feed(&d, buf, n, &f, err), WIRE_ERROR);
    CHECK(strstr(err, "backwards") != NULL);
    /* a half tail */
    d = handshaken();
    c.truncated_values = 9;
    n = wire_encode_counters(buf, sizeof buf, &c);
    put_le(buf, 24, 4);
    CHECK_EQ_INT(feed(&d, buf, n - 8, &f, err), WIRE_ERROR);
}

/* A recorder that predates vectors sends only the old frames: a
 * version-1 byte stream of that time, kept here byte for byte, still
 * decodes. */
static void an_old_recorders_stream_still_decodes(void)
{
    static const uint8_t old[] = {
        /* NAME 1 "fwd" */
        8, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 3, 'f', 'w', 'd',
        /* STEP 5: begin 100, end 300, no flags, one phase without self */
        68, 0, 0, 0, 5, 0, 0, 0,
        5, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0,
        44, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0,
        1, 0, 0, 0, 1, 0, 0, 0, 200, 0, 0, 0, 0, 0, 0, 0,
        110, 0, 0, 0, 0, 0, 0, 0,
        /* COUNTERS 1, 0 */
        16, 0, 0, 0, 6, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0};
    wire_decoder d = ready_decoder();
    wire_frame f;
    char err[256];
    size_t off = 0, used = 0;
    int frames = 0;
    {
        uint8_t hb[512];
        wire_hello h = make_hello();
        size_t hn = wire_encode_hello(hb, sizeof hb, &h);
        REQUIRE(feed(&d, hb, hn, &f, err) == WIRE_OK);
    }
    while (off < sizeof old) {
        wire_result rc = wire_decoder_next(&d, old + off, sizeof old - off,
                                           &f, &used, err, sizeof err);
        REQUIRE(rc == WIRE_OK);
        off += used;
        frames++;
    }
    CHECK_EQ_INT(frames, 3);
    CHECK_EQ_INT(f.type, WIRE_COUNTERS);
    CHECK_EQ_INT(f.u.counters.dropped_events, 1);
    CHECK_EQ_INT(f.u.counters.dropped_vectors, 0);
}

TEST_LIST(TEST(hello_round_trip), TEST(rejects_wrong_token),
          TEST(values_round_trip_keep_nan_and_inf), TEST(values_rules),
          TEST(labels_chunks_in_order),
          TEST(counters_vector_tail_is_optional),
          TEST(an_old_recorders_stream_still_decodes),
          TEST(rejects_unknown_version), TEST(rejects_other_run_and_bad_rank),
          TEST(rejects_garbage_and_oversize), TEST(requires_hello_first),
          TEST(step_round_trip_and_order),
          TEST(step_rejects_undeclared_and_bad_times),
          TEST(step_self_time_optional),
          TEST(status_round_trip_and_rules),
          TEST(status_collective),
          TEST(resumed_round_trip_and_rules),
          TEST(rejects_trailing_bytes_and_unknown_type),
          TEST(names_and_counters_rules), TEST(recorder_side_welcome_reject),
          TEST(command_round_trip_and_rules),
          TEST(features_and_profile_done), TEST(token_hex))
