/*
 * remote_stacks_test.c - unit tests for remote_stacks.c on a real loop,
 * with a fake ASK hook standing in for the agent links: chunks assembled
 * in order and handed back in rank order; a rank over the limit, an
 * answer that is not its rank's JSON object, a node that never answers
 * (after the wait), a node lost meanwhile, a node that cannot be asked and
 * a closing controller each become placeholders that say why; chunks of a
 * fetch that ended, or for another node's rank, are dropped.  At scale:
 * 64 nodes of 64 ranks, one silent, its ranks named at the end of the
 * wait and every other node's answers kept as they came.
 */
#include "remote_stacks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing.h"

/* 3 nodes of 2 ranks: the remote ranks are 2..5. */
#define NNODES 3
#define NPROC 2
#define NREMOTE ((NNODES - 1) * NPROC)

typedef struct {
    int asked[NNODES];
    uint32_t last_id, last_deadline;
    int never_joined; /* node that cannot be asked, 0: none */
    int calls;
    char ranks[NREMOTE][512];
    size_t n;
} fake;

static int ask(void *ctx, uint32_t node, const link_stacks_req *req,
               char *why, size_t whylen)
{
    fake *f = ctx;
    if ((int)node == f->never_joined) {
        snprintf(why, whylen, "node %u never joined", node);
        return -1;
    }
    f->asked[node]++;
    f->last_id = req->request_id;
    f->last_deadline = req->deadline_ms;
    return 0;
}

static const char *host_of(void *ctx, uint32_t node)
{
    static const char *const hosts[NNODES] = {"n0", "n1", "n2"};
    return hosts[node];
}

static void on_done(void *ctx, const char *const *ranks, size_t n)
{
    fake *f = ctx;
    f->calls++;
    f->n = n;
    for (size_t i = 0; i < n && i < NREMOTE; i++)
        snprintf(f->ranks[i], sizeof f->ranks[i], "%s", ranks[i]);
}

static ss_remote_stacks *make(uv_loop_t *loop, fake *f)
{
    ss_remote_stacks_config cfg = {NNODES, NPROC, f, ask, host_of, 20};
    return ss_remote_stacks_new(loop, &cfg);
}

/* Sends OBJ for RANK from its node in chunks of CHUNK bytes. */
static void send_rank(ss_remote_stacks *g, uint32_t id, uint32_t rank,
                      const char *obj, size_t chunk)
{
    size_t len = strlen(obj);
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        link_stacks_part p = {id, rank, off + n == len, (uint32_t)n,
                              (const uint8_t *)obj + off};
        CHECK_EQ_INT(ss_remote_stacks_part(g, rank / NPROC, &p), 0);
    }
}

static char *rank_obj(uint32_t rank)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "{\"rank\":%u,\"host\":\"n%u\",\"pid\":%u,"
             "\"state\":\"ok\",\"why\":null,\"threads\":[]}", rank,
             rank / NPROC, 100 + rank);
    return buf;
}

static void finish_loop(uv_loop_t *loop, ss_remote_stacks *g)
{
    ss_remote_stacks_close(g);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(loop), 0);
}

static void chunks_in_order_make_every_rank(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    fake f = {0};
    ss_remote_stacks *g = make(&loop, &f);
    REQUIRE(g);
    CHECK_EQ_INT(ss_remote_stacks_fetch(g, 0, 1500, on_done, &f), 0);
    CHECK_EQ_INT(f.asked[0], 0);
    CHECK_EQ_INT(f.asked[1], 1);
    CHECK_EQ_INT(f.asked[2], 1);
    CHECK_EQ_INT(f.last_deadline, 1500);
    /* answers out of rank order, in chunks of 7 bytes */
    for (uint32_t rank = 5; rank >= 2; rank--)
        send_rank(g, f.last_id, rank, rank_obj(rank), 7);
    CHECK_EQ_INT(f.calls, 1); /* at once, not at the end of the wait */
    CHECK_EQ_INT(f.n, NREMOTE);
    for (uint32_t i = 0; i < NREMOTE; i++)
        CHECK_STR(f.ranks[i], rank_obj(2 + i));
    /* the fetch ended: late chunks are dropped */
    link_stacks_part late = {f.last_id, 2, 1, 2, (const uint8_t *)"{}"};
    CHECK_EQ_INT(ss_remote_stacks_part(g, 1, &late), -1);
    finish_loop(&loop, g);
    CHECK_EQ_INT(f.calls, 1);
}

static void wrong_node_and_bad_json_are_not_taken(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    fake f = {0};
    ss_remote_stacks *g = make(&loop, &f);
    REQUIRE(g);
    CHECK_EQ_INT(ss_remote_stacks_fetch(g, 1, 2000, on_done, &f), 0);
    uint32_t id = f.last_id;
    /* node 1 may not answer for node 2's rank 4, nor for rank 99 */
    link_stacks_part p = {id, 4, 1, 2, (const uint8_t *)"{}"};
    CHECK_EQ_INT(ss_remote_stacks_part(g, 1, &p), -1);
    p.rank = 99;
    CHECK_EQ_INT(ss_remote_stacks_part(g, 1, &p), -1);
    p.rank = 2;
    p.request_id = id + 1;
    CHECK_EQ_INT(ss_remote_stacks_part(g, 1, &p), -1);
    /* rank 2: trailing bytes; rank 3: another rank's object; rank 4: not
     * JSON; rank 5: fine */
    send_rank(g, id, 2, "{\"rank\":2,\"threads\":[]} ]", 100);
    send_rank(g, id, 3, "{\"rank\":2,\"threads\":[]}", 100);
    send_rank(g, id, 4, "{\"rank\":4,", 100);
    send_rank(g, id, 5, rank_obj(5), 100);
    REQUIRE(f.calls == 1);
    for (int i = 0; i < 3; i++) {
        CHECK(strstr(f.ranks[i], "\"state\":\"no_answer\"") != NULL);
        CHECK(strstr(f.ranks[i], "sent stacks that are not a JSON object "
                                 "of rank") != NULL);
    }
    CHECK(strstr(f.ranks[0], "{\"rank\":2,\"host\":\"n1\",\"pid\":0,") ==
          f.ranks[0]);
    CHECK(strstr(f.ranks[2], "\"host\":\"n2\"") != NULL);
    CHECK_STR(f.ranks[3], rank_obj(5));
    finish_loop(&loop, g);
}

static void a_rank_over_the_limit_is_said(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    fake f = {0};
    ss_remote_stacks *g = make(&loop, &f);
    REQUIRE(g);
    CHECK_EQ_INT(ss_remote_stacks_fetch(g, 1, 2000, on_done, &f), 0);
    uint32_t id = f.last_id;
    static uint8_t chunk[LINK_MAX_STACKS_CHUNK];
    memset(chunk, ' ', sizeof chunk);
    size_t sent = 0;
    while (sent <= SS_REMOTE_STACKS_MAX_RANK) {
        link_stacks_part p = {id, 3, 0, sizeof chunk, chunk};
        CHECK_EQ_INT(ss_remote_stacks_part(g, 1, &p), 0);
        sent += sizeof chunk;
    }
    link_stacks_part end = {id, 3, 1, 1, (const uint8_t *)"}"};
    CHECK_EQ_INT(ss_remote_stacks_part(g, 1, &end), 0);
    send_rank(g, id, 2, rank_obj(2), 50);
    send_rank(g, id, 4, rank_obj(4), 50);
    send_rank(g, id, 5, rank_obj(5), 50);
    REQUIRE(f.calls == 1);
    CHECK_STR(f.ranks[0], rank_obj(2));
    CHECK(strstr(f.ranks[1], "\"rank\":3,") != NULL);
    CHECK(strstr(f.ranks[1], "its stacks exceed what the controller takes "
                             "(8 MiB a rank, 64 MiB a request)") != NULL);
    finish_loop(&loop, g);
}

static void a_silent_node_gets_placeholders_after_the_wait(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    fake f = {0};
    ss_remote_stacks *g = make(&loop, &f);
    REQUIRE(g);
    CHECK_EQ_INT(ss_remote_stacks_fetch(g, 0, 80, on_done, &f), 0);
    send_rank(g, f.last_id, 2, rank_obj(2), 50);
    send_rank(g, f.last_id, 3, rank_obj(3), 50);
    /* node 2 sends half of rank 4 and nothing else */
    link_stacks_part half = {f.last_id, 4, 0, 5, (const uint8_t *)"{\"ran"};
    CHECK_EQ_INT(ss_remote_stacks_part(g, 2, &half), 0);
    CHECK_EQ_INT(f.calls, 0);
    uint64_t t0 = uv_now(&loop);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_now(&loop) - t0 >= 100); /* deadline 80 + slack 20 */
    REQUIRE(f.calls == 1);
    CHECK_STR(f.ranks[0], rank_obj(2));
    CHECK_STR(f.ranks[1], rank_obj(3));
    CHECK_STR(f.ranks[2], "{\"rank\":4,\"host\":\"n2\",\"pid\":0,\"state\":"
                          "\"no_answer\",\"why\":\"node 2 did not answer "
                          "within 0.1 s\",\"threads\":[]}");
    CHECK(strstr(f.ranks[3], "node 2 did not answer within 0.1 s") != NULL);
    finish_loop(&loop, g);
}

static void lost_and_unjoined_nodes_are_said(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    fake f = {.never_joined = 2};
    ss_remote_stacks *g = make(&loop, &f);
    REQUIRE(g);
    /* node 2 cannot be asked; node 1 is lost while it collects */
    CHECK_EQ_INT(ss_remote_stacks_fetch(g, 0, 1500, on_done, &f), 0);
    CHECK_EQ_INT(f.asked[2], 0);
    send_rank(g, f.last_id, 2, rank_obj(2), 50);
    CHECK_EQ_INT(f.calls, 0);
    ss_remote_stacks_node_gone(g, 1, "node 1 was lost");
    REQUIRE(f.calls == 1); /* at once */
    CHECK_STR(f.ranks[0], rank_obj(2));
    CHECK(strstr(f.ranks[1], "\"why\":\"node 1 was lost\"") != NULL);
    CHECK(strstr(f.ranks[2], "\"why\":\"node 2 never joined\"") != NULL);
    CHECK(strstr(f.ranks[3], "\"why\":\"node 2 never joined\"") != NULL);
    /* no node can be asked: answered before fetch returns */
    fake g2f = {.never_joined = 1};
    ss_remote_stacks_config cfg = {2, NPROC, &g2f, ask, host_of, 0};
    ss_remote_stacks *two = ss_remote_stacks_new(&loop, &cfg);
    REQUIRE(two);
    CHECK_EQ_INT(ss_remote_stacks_fetch(two, 0, 1500, on_done, &g2f), 0);
    CHECK_EQ_INT(g2f.calls, 1);
    CHECK_EQ_INT(g2f.n, 2);
    ss_remote_stacks_close(two);
    finish_loop(&loop, g);
}

static void closing_answers_every_fetch(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    fake f = {0};
    ss_remote_stacks *g = make(&loop, &f);
    REQUIRE(g);
    CHECK_EQ_INT(ss_remote_stacks_fetch(g, 0, 0, on_done, &f), -1);
    CHECK_EQ_INT(ss_remote_stacks_fetch(g, 0, LINK_MAX_STACKS_DEADLINE_MS + 1,
                                        on_done, &f), -1);
    int started = 0;
    while (ss_remote_stacks_fetch(g, 0, 1500, on_done, &f) == 0)
        started++;
    CHECK_EQ_INT(started, SS_REMOTE_STACKS_MAX_FETCHES);
    CHECK_EQ_INT(f.calls, 0);
    ss_remote_stacks_close(g);
    CHECK_EQ_INT(f.calls, SS_REMOTE_STACKS_MAX_FETCHES);
    CHECK(strstr(f.ranks[3], "the controller is closing") != NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* ---- 64 nodes of 64 ranks ---- */

#define BIG_NODES 65
#define BIG_NPROC 64
#define BIG_REMOTE ((BIG_NODES - 1) * BIG_NPROC)

typedef struct {
    uint32_t id;
    int asked, calls;
    size_t n;
    int kept, named; /* answers as sent; the silent node's, named */
    uint64_t done_at;
    uv_loop_t *loop;
} big_fake;

static int big_ask(void *ctx, uint32_t node, const link_stacks_req *req,
                   char *why, size_t whylen)
{
    big_fake *f = ctx;
    f->asked++;
    f->id = req->request_id;
    return 0;
}

static void big_done(void *ctx, const char *const *ranks, size_t n)
{
    big_fake *f = ctx;
    f->calls++;
    f->n = n;
    f->done_at = uv_now(f->loop);
    for (size_t i = 0; i < n; i++) {
        uint32_t rank = BIG_NPROC + (uint32_t)i;
        if (rank / BIG_NPROC == BIG_NODES - 1)
            f->named += strstr(ranks[i], "\"why\":\"node 64 did not answer "
                                         "within 0.3 s\"") != NULL;
        else
            f->kept += strcmp(ranks[i], rank_obj(rank)) == 0;
    }
}

/* Node 64 never answers; the 63 others answer at once.  The fetch waits
 * for node 64 to the end of its wait, not longer, and not once per node;
 * then names node 64 for each of its ranks and keeps every other
 * answer. */
static void one_silent_node_among_64(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    big_fake f = {.loop = &loop};
    ss_remote_stacks_config cfg = {BIG_NODES, BIG_NPROC, &f, big_ask, NULL,
                                   50};
    ss_remote_stacks *g = ss_remote_stacks_new(&loop, &cfg);
    REQUIRE(g);
    uv_update_time(&loop);
    uint64_t t0 = uv_now(&loop);
    CHECK_EQ_INT(ss_remote_stacks_fetch(g, 0, 250, big_done, &f), 0);
    CHECK_EQ_INT(f.asked, BIG_NODES - 1); /* every node asked at once */
    int taken = 0;
    for (uint32_t rank = BIG_NPROC; rank < (BIG_NODES - 1) * BIG_NPROC;
         rank++) {
        const char *o = rank_obj(rank);
        link_stacks_part p = {f.id, rank, 1, (uint32_t)strlen(o),
                              (const uint8_t *)o};
        taken += ss_remote_stacks_part(g, rank / BIG_NPROC, &p) == 0;
    }
    CHECK_EQ_INT(taken, BIG_REMOTE - BIG_NPROC);
    CHECK_EQ_INT(f.calls, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    REQUIRE(f.calls == 1);
    CHECK_EQ_INT((int)f.n, BIG_REMOTE);
    CHECK_EQ_INT(f.kept, BIG_REMOTE - BIG_NPROC);
    CHECK_EQ_INT(f.named, BIG_NPROC);
    CHECK(f.done_at - t0 >= 300);  /* deadline 250 + slack 50 */
    CHECK(f.done_at - t0 < 1300);  /* one wait, not one per node */
    finish_loop(&loop, g);
}

TEST_LIST(TEST(chunks_in_order_make_every_rank),
          TEST(wrong_node_and_bad_json_are_not_taken),
          TEST(a_rank_over_the_limit_is_said),
          TEST(a_silent_node_gets_placeholders_after_the_wait),
          TEST(lost_and_unjoined_nodes_are_said),
          TEST(closing_answers_every_fetch),
          TEST(one_silent_node_among_64))
