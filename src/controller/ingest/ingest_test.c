/*
 * ingest_test.c - the ingest socket on a real libuv loop: handshakes,
 * name translation, names the run has no room for (dropped and counted,
 * never a disconnect), rejections that leave other connections alone, and
 * the handshake timeout, and a backlog read in step.  Clients are plain
 * blocking sockets on a thread.
 */
#include <math.h>

#include "ingest.h"
#include "testing.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static const uint8_t k_token[WIRE_TOKEN_SIZE] = {9, 8, 7, 6, 5, 4, 3, 2,
                                                 1, 0, 1, 2, 3, 4, 5, 6};

typedef struct {
    int hellos, steps, byes, disconnects, rejects, names, statuses;
    int status_phase[2]; /* the phases of the first two STATUS frames */
    uint64_t status_step;
    char last_reject[256];
    uint32_t last_phase_name;
    ss_step_record last_step; /* the last record, as handed on */
    uint32_t n_values;   /* its vectors, the first 4 elements of each */
    ss_values_item values[4];
    double value_bits[4][4];
    int label_sets, label_name;
    uint32_t n_labels;
    char last_label[300];
    int refused;         /* on_name_refused calls */
    uint32_t refused_rank;
    char refused_name[WIRE_MAX_NAME_LEN + 1];
    uint32_t values_dropped;
    int resumed;          /* on_resumed calls */
    uint64_t resumed_step;
    int said_bye;
    int profile_done;             /* on_profile_done calls */
    wire_profile_done last_done;  /* and the last answer */
    ss_ingest *in;
    ss_ingest_stats stats; /* as they were when the ingest was closed */
    int close_after; /* close the ingest after this many disconnects +
                        rejections, a little later so REJECTs go out */
    uv_timer_t closer;
    /* reading in step: each rank's latest step (ranks 0 and 1), and the
     * most one of them was ever ahead of the other */
    int64_t latest[2];
    int64_t most_ahead;
    /* first steps (t_first_step): asked per rank, the first one asked
     * held until the other's is asked, rank 1's moved up by 100 */
    int hold_first;
    int first_asked[2];
    int64_t first_of[2];      /* the first step handed on, per rank */
    int early[2];             /* a step of the rank came before the other's
                                 first */
} seen;

static void on_closer(uv_timer_t *t)
{
    seen *s = t->data;
    ss_ingest_get_stats(s->in, &s->stats);
    ss_ingest_close(s->in);
    uv_close((uv_handle_t *)t, NULL);
}

static void count_end(seen *s)
{
    if (s->disconnects + s->rejects == s->close_after)
        uv_timer_start(&s->closer, on_closer, 100, 0);
}

static int t_intern(void *ctx, const char *name)
{
    seen *s = ctx;
    s->names++;
    if (strncmp(name, "over", 4) == 0)
        return -1; /* the run's name table is full */
    return strcmp(name, "forward") == 0 ? 17 : 3;
}

static void t_name_refused(void *ctx, uint32_t rank, const char *name)
{
    seen *s = ctx;
    s->refused++;
    s->refused_rank = rank;
    snprintf(s->refused_name, sizeof s->refused_name, "%s", name);
}

static void t_values_dropped(void *ctx, uint32_t rank, uint32_t n)
{
    ((seen *)ctx)->values_dropped += n;
}

static int t_hello(void *ctx, const wire_hello *h, char *reason, size_t n)
{
    seen *s = ctx;
    s->hellos++;
    if (h->rank == 3) {
        snprintf(reason, n, "rank 3 is not welcome");
        return -1;
    }
    return 0;
}

static void t_step(void *ctx, uint32_t rank, const ss_step_record *rec,
                   const ss_values_item *values, uint32_t n_values)
{
    seen *s = ctx;
    s->steps++;
    if (rank < 2 && s->first_of[!rank] == 0)
        s->early[rank] = 1;
    if (rank < 2 && s->first_of[rank] == 0)
        s->first_of[rank] = (int64_t)rec->step;
    if (rank < 2) {
        s->latest[rank] = (int64_t)rec->step;
        int64_t ahead = s->latest[rank] - s->latest[!rank];
        if (ahead > s->most_ahead)
            s->most_ahead = ahead;
    }
    s->last_phase_name = (uint32_t)rec->phases[0].name;
    s->last_step = *rec;
    s->n_values = n_values;
    for (uint32_t i = 0; i < n_values && i < 4; i++) {
        s->values[i] = values[i];
        s->values[i].v = NULL; /* valid during the call only */
        memcpy(s->value_bits[i], values[i].v,
               (values[i].n < 4 ? values[i].n : 4) * sizeof(double));
    }
}

static int t_first_step(void *ctx, uint32_t rank, uint64_t step,
                        int can_hold, int64_t *offset)
{
    seen *s = ctx;
    (void)step;
    *offset = 0;
    if (rank >= 2)
        return 0;
    s->first_asked[rank]++;
    if (!s->hold_first || !can_hold)
        return 0;
    if (!s->first_asked[!rank])
        return 1; /* the first one waits for the other */
    if (rank == 1)
        *offset = 100;
    ss_ingest_release_held(s->in); /* from inside a callback */
    return 0;
}

static void t_labels(void *ctx, uint32_t rank, int name,
                     const char *const *labels, uint32_t n)
{
    seen *s = ctx;
    s->label_sets++;
    s->label_name = name;
    s->n_labels = n;
    snprintf(s->last_label, sizeof s->last_label, "%s",
             n ? labels[n - 1] : "");
}

static void t_status(void *ctx, uint32_t rank, const wire_status *st,
                     int phase, int collective)
{
    seen *s = ctx;
    if (s->statuses < 2)
        s->status_phase[s->statuses] = phase;
    s->statuses++;
    s->status_step = st->step;
}

static void t_resumed(void *ctx, uint32_t rank, const wire_resumed *r)
{
    seen *s = ctx;
    s->resumed++;
    s->resumed_step = r->step;
}

static void t_profile_done(void *ctx, uint32_t rank,
                           const wire_profile_done *pd)
{
    seen *s = ctx;
    s->profile_done++;
    s->last_done = *pd;
    (void)rank;
}

static void t_bye(void *ctx, uint32_t rank, const wire_bye *b)
{
    ((seen *)ctx)->byes++;
}

static void t_disconnect(void *ctx, uint32_t rank, int said_bye)
{
    seen *s = ctx;
    s->said_bye = said_bye;
    s->disconnects++;
    count_end(s);
}

static void t_rejected(void *ctx, int32_t rank, const char *reason)
{
    seen *s = ctx;
    s->rejects++;
    snprintf(s->last_reject, sizeof s->last_reject, "%s", reason);
    count_end(s);
}

typedef struct {
    char path[108];
    uint32_t rank;
    int bad_token;
    int silent;       /* connect and say nothing */
    int over_limit;   /* also use a name the run refuses, in two steps */
    int got_reject;   /* out */
    int got_welcome;  /* out */
} client;

static int dial(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    for (int i = 0; i < 200; i++) {
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            return fd;
        usleep(10000);
    }
    close(fd);
    return -1;
}

/* The HELLO of RANK of a WORLD-rank run "r1", with the run's token. */
static wire_hello hello_of(uint32_t rank, uint32_t world)
{
    wire_hello h;
    memset(&h, 0, sizeof h);
    h.version = WIRE_VERSION;
    h.rank = rank;
    h.world_size = world;
    memcpy(h.token, k_token, sizeof k_token);
    strcpy(h.run_id, "r1");
    strcpy(h.host, "h");
    return h;
}

/* Reads the controller's answer frames until EOF or a WELCOME. */
static void read_answer(client *c, int fd, int until_eof)
{
    uint8_t buf[1024];
    size_t len = 0;
    wire_decoder d;
    wire_decoder_init(&d, WIRE_FROM_CONTROLLER, NULL, NULL);
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n <= 0)
            return;
        len += (size_t)n;
        wire_frame f;
        size_t used;
        char err[128];
        while (wire_decoder_next(&d, buf, len, &f, &used, err, sizeof err) ==
               WIRE_OK) {
            c->got_reject |= f.type == WIRE_REJECT;
            c->got_welcome |= f.type == WIRE_WELCOME;
            memmove(buf, buf + used, len - used);
            len -= used;
            if (f.type == WIRE_WELCOME && !until_eof)
                return;
        }
    }
}

static void *run_client(void *arg)
{
    client *c = arg;
    int fd = dial(c->path);
    if (fd < 0)
        return NULL;
    if (c->silent) {
        read_answer(c, fd, 1);
        close(fd);
        return NULL;
    }
    uint8_t buf[2048];
    wire_hello h = hello_of(c->rank, 4);
    if (c->bad_token)
        h.token[0] ^= 1;
    size_t n = wire_encode_hello(buf, sizeof buf, &h);
    if (send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n)
        return NULL;
    read_answer(c, fd, c->bad_token || c->rank == 3);
    if (c->got_welcome) {
        wire_name nm = {5, "forward"};
        n = wire_encode_name(buf, sizeof buf, &nm);
        static wire_step s;
        memset(&s, 0, sizeof s);
        s.step = 1;
        s.begin_ns = 1;
        s.end_ns = 2;
        s.n_phases = 1;
        s.phases[0] = (wire_phase){5, 1, 1, 1, 0};
        if (c->over_limit) {
            /* local id 6 is refused: its phase, sync and metric go, the
             * rest of each record stays */
            wire_name over = {6, "over-the-limit"};
            n += wire_encode_name(buf + n, sizeof buf - n, &over);
            s.n_phases = 2;
            s.phases[0] = (wire_phase){6, 1, 7, 1, 0};
            s.phases[1] = (wire_phase){5, 1, 1, 1, 0};
            s.n_syncs = 1;
            s.syncs[0] = (wire_sync){6, 1};
            s.n_metrics = 2;
            s.metrics[0] = (wire_metric){6, 1.5};
            s.metrics[1] = (wire_metric){5, 2.5};
            n += wire_encode_step(buf + n, sizeof buf - n, &s);
            s.step = 2;
            /* sizes and self times as sent: a size past INT64_MAX
             * clamps, the device's unsampled stays missing */
            s.flags = WIRE_STEP_HAS_RSS | WIRE_STEP_HAS_SELF;
            s.rss_bytes = UINT64_MAX;
            s.device_bytes = 123;
            s.phases[1].self_ns = 1;
        }
        n += wire_encode_step(buf + n, sizeof buf - n, &s);
        wire_status st = {2, c->over_limit ? 6 : 5, 3, 0, 0, 0};
        n += wire_encode_status(buf + n, sizeof buf - n, &st);
        st = (wire_status){WIRE_NO_STEP, 0, 4, 0, 0, 0};
        n += wire_encode_status(buf + n, sizeof buf - n, &st);
        wire_resumed rs = {41, 5};
        n += wire_encode_resumed(buf + n, sizeof buf - n, &rs);
        wire_bye b = {1};
        n += wire_encode_bye(buf + n, sizeof buf - n, &b);
        if (send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n)
            return NULL;
    }
    close(fd);
    return NULL;
}

static int accept_failures, accept_error, gave_up;

static void t_accept_failed(void *ctx, int err)
{
    (void)ctx;
    accept_failures++;
    accept_error = err;
}

static uint32_t max_lead; /* the ingest's max_lead_steps */

static ss_ingest *start(uv_loop_t *loop, seen *s, const char *path,
                        uint32_t timeout_ms)
{
    ss_ingest_config cfg = {.unix_path = path, .run_id = "r1",
                            .handshake_timeout_ms = timeout_ms,
                            .max_lead_steps = max_lead};
    memcpy(cfg.token, k_token, sizeof k_token);
    ss_ingest_callbacks cb = {.ctx = s, .intern = t_intern, .on_hello = t_hello,
                              .on_step = t_step, .on_bye = t_bye,
                              .on_labels = t_labels,
                              .on_disconnect = t_disconnect,
                              .on_rejected = t_rejected,
                              .on_status = t_status,
                              .on_name_refused = t_name_refused,
                              .on_values_dropped = t_values_dropped,
                              .on_resumed = t_resumed,
                              .on_profile_done = t_profile_done,
                              .on_accept_failed = t_accept_failed,
                              .on_first_step = t_first_step};
    char err[256];
    signal(SIGPIPE, SIG_IGN); /* as `stepscope run` does */
    ss_ingest *in = ss_ingest_start(loop, &cfg, &cb, err, sizeof err);
    s->in = in;
    uv_timer_init(loop, &s->closer);
    s->closer.data = s;
    return in;
}

static void sock_path(char *out, size_t n, const char *tag)
{
    snprintf(out, n, "/tmp/ss-ingest-test-%d-%s.sock", (int)getpid(), tag);
    unlink(out);
}

static void accepts_and_translates(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    s.close_after = 1;
    client c = {.rank = 1};
    sock_path(c.path, sizeof c.path, "ok");
    REQUIRE(start(&loop, &s, c.path, 5000) != NULL);
    pthread_t t;
    pthread_create(&t, NULL, run_client, &c);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    CHECK(c.got_welcome);
    CHECK_EQ_INT(s.hellos, 1);
    CHECK_EQ_INT(s.steps, 1);
    CHECK_EQ_INT(s.last_phase_name, 17); /* local id 5 -> run-wide 17 */
    CHECK_EQ_INT(s.statuses, 2);
    CHECK_EQ_INT(s.status_phase[0], 17);
    CHECK_EQ_INT(s.status_phase[1], -1); /* no phase */
    CHECK(s.status_step == WIRE_NO_STEP);
    CHECK_EQ_INT(s.resumed, 1);
    CHECK_EQ_INT(s.resumed_step, 41);
    CHECK_EQ_INT(s.byes, 1);
    CHECK_EQ_INT(s.said_bye, 1);
    CHECK_EQ_INT(s.rejects, 0);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* A name the run has no room for: never a disconnect.  The items under it
 * are dropped and counted, everything else flows. */
static void a_refused_name_drops_its_values_not_the_rank(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    s.close_after = 1;
    client c = {.rank = 2, .over_limit = 1};
    sock_path(c.path, sizeof c.path, "over");
    REQUIRE(start(&loop, &s, c.path, 5000) != NULL);
    pthread_t t;
    pthread_create(&t, NULL, run_client, &c);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    CHECK(c.got_welcome);
    CHECK(!c.got_reject);
    CHECK_EQ_INT(s.rejects, 0);
    CHECK_EQ_INT(s.refused, 1);
    CHECK_EQ_INT(s.refused_rank, 2);
    CHECK_STR(s.refused_name, "over-the-limit");
    CHECK_EQ_INT(s.steps, 2); /* both records, after the refusal */
    CHECK_EQ_INT(s.values_dropped, 2 * 3);
    const ss_step_record *last = &s.last_step;
    CHECK_EQ_INT(last->step, 2);
    REQUIRE(last->n_phases == 1);
    CHECK_EQ_INT(last->phases[0].name, 17);
    CHECK_EQ_INT(last->phases[0].total_ns, 1);
    CHECK_EQ_INT(last->phases[0].self_ns, 1);
    CHECK(last->rss_bytes == INT64_MAX);
    CHECK(last->device_bytes == SS_MISSING);
    CHECK_EQ_INT(last->n_syncs, 0);
    REQUIRE(last->n_metrics == 1);
    CHECK_EQ_INT(last->metrics[0].name, 17);
    CHECK(last->metrics[0].value == 2.5);
    CHECK_EQ_INT(s.status_phase[0], -1); /* a refused phase shows as none */
    CHECK_EQ_INT(s.byes, 1);
    CHECK_EQ_INT(s.said_bye, 1);
    CHECK_EQ_INT(s.stats.names_refused, 1);
    CHECK_EQ_INT(s.stats.values_dropped, 6);
    CHECK_EQ_INT(s.stats.steps, 2);
    CHECK_EQ_INT(s.stats.rejected, 0);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

static void rejection_spares_others(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    s.close_after = 2; /* the bad one's rejection, the good one's end */
    client bad = {.rank = 0, .bad_token = 1}, good = {.rank = 2};
    sock_path(bad.path, sizeof bad.path, "mixed");
    strcpy(good.path, bad.path);
    REQUIRE(start(&loop, &s, bad.path, 5000) != NULL);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, run_client, &bad);
    pthread_create(&t2, NULL, run_client, &good);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK(bad.got_reject);
    CHECK(!bad.got_welcome);
    CHECK(good.got_welcome);
    CHECK_EQ_INT(s.rejects, 1);
    CHECK(strstr(s.last_reject, "wrong token") != NULL);
    CHECK_EQ_INT(s.steps, 1);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

static void controller_refusal_is_sent(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    s.close_after = 1;
    client c = {.rank = 3};
    sock_path(c.path, sizeof c.path, "refuse");
    REQUIRE(start(&loop, &s, c.path, 5000) != NULL);
    pthread_t t;
    pthread_create(&t, NULL, run_client, &c);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    CHECK(c.got_reject);
    CHECK_STR(s.last_reject, "rank 3 is not welcome");
    CHECK_EQ_INT(s.disconnects, 0); /* never accepted, so no disconnect */
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

static void silent_peer_times_out(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    s.close_after = 1;
    client c = {.silent = 1};
    sock_path(c.path, sizeof c.path, "silent");
    REQUIRE(start(&loop, &s, c.path, 200) != NULL);
    pthread_t t;
    pthread_create(&t, NULL, run_client, &c);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    CHECK(c.got_reject);
    CHECK(strstr(s.last_reject, "handshake timeout") != NULL);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* ---- channels: rank connections carried by a transport ---- */

typedef struct {
    uint8_t out[256]; /* what the controller sent back */
    size_t out_len;
    int closed;       /* the controller closed the channel */
    int64_t offset;
} fake_transport;

static int ft_write(void *ctx, const uint8_t *bytes, size_t len)
{
    fake_transport *t = ctx;
    if (t->out_len + len > sizeof t->out)
        return -1;
    memcpy(t->out + t->out_len, bytes, len);
    t->out_len += len;
    return 0;
}

static void ft_closed(void *ctx)
{
    ((fake_transport *)ctx)->closed++;
}

/* A rank's whole conversation: HELLO, a name, one step, STATUS, BYE. */
static size_t channel_script(uint8_t *buf, size_t cap, uint32_t rank,
                             int bad_token)
{
    wire_hello h = hello_of(rank, 4);
    h.token[0] ^= (uint8_t)bad_token;
    strcpy(h.host, "node1");
    size_t n = wire_encode_hello(buf, cap, &h);
    wire_name nm = {5, "forward"};
    n += wire_encode_name(buf + n, cap - n, &nm);
    static wire_step st;
    memset(&st, 0, sizeof st);
    st.step = 1;
    st.begin_ns = 5000;
    st.end_ns = 9000;
    st.n_phases = 1;
    st.phases[0] = (wire_phase){5, 1, 100, 6000, 0};
    st.n_syncs = 1;
    st.syncs[0] = (wire_sync){5, 8000};
    n += wire_encode_step(buf + n, cap - n, &st);
    wire_status ws = {2, 5, 8500, 0, 0, 0};
    n += wire_encode_status(buf + n, cap - n, &ws);
    wire_bye b = {1};
    n += wire_encode_bye(buf + n, cap - n, &b);
    return n;
}

/* Fed in pieces of CHUNK bytes, a channel behaves as a socket would, and
 * every time in its records moves by the transport's clock offset. */
static void channel_with_chunk(size_t chunk)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    char path[108];
    sock_path(path, sizeof path, "chan");
    ss_ingest *in = start(&loop, &s, path, 5000);
    REQUIRE(in != NULL);
    fake_transport ft = {.offset = -1000};
    ss_ingest_transport tr = {&ft, ft_write, ft_closed, &ft.offset, 2, 2};
    ss_ingest_channel *ch = ss_ingest_channel_open(in, &tr);
    REQUIRE(ch != NULL);
    uint8_t buf[2048];
    size_t n = channel_script(buf, sizeof buf, 2, 0);
    for (size_t off = 0; off < n; off += chunk)
        ss_ingest_channel_feed(ch, buf + off, n - off < chunk ? n - off : chunk);
    CHECK_EQ_INT(s.hellos, 1);
    CHECK_EQ_INT(s.steps, 1);
    CHECK_EQ_INT(s.last_phase_name, 17);
    CHECK(s.last_step.begin_ns == 4000 && s.last_step.end_ns == 8000);
    CHECK(s.last_step.phases[0].first_begin_ns == 5000);
    CHECK(s.last_step.syncs[0].arrival_ns == 7000);
    /* a recorder that sent no sizes and no self time: missing, not 0 */
    CHECK(s.last_step.rss_bytes == SS_MISSING);
    CHECK(s.last_step.device_bytes == SS_MISSING);
    CHECK(s.last_step.phases[0].self_ns == SS_MISSING);
    CHECK_EQ_INT(s.last_step.phases[0].count, 1);
    CHECK_EQ_INT(s.last_step.phases[0].total_ns, 100);
    CHECK_EQ_INT(s.statuses, 1);
    CHECK_EQ_INT(s.byes, 1);
    /* WELCOME went back through the transport */
    wire_decoder d;
    wire_decoder_init(&d, WIRE_FROM_CONTROLLER, NULL, NULL);
    wire_frame f;
    size_t used;
    char err[128];
    CHECK(wire_decoder_next(&d, ft.out, ft.out_len, &f, &used, err,
                            sizeof err) == WIRE_OK &&
          f.type == WIRE_WELCOME);
    ss_ingest_channel_gone(ch); /* the rank closed its socket */
    CHECK_EQ_INT(s.disconnects, 1);
    CHECK_EQ_INT(s.said_bye, 1);
    CHECK_EQ_INT(ft.closed, 0); /* the far end closed it, not us */
    ss_ingest_close(in);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&s.closer, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

static void channel_fed_byte_by_byte(void)
{
    channel_with_chunk(1);
}

static void channel_fed_at_once(void)
{
    channel_with_chunk(100000);
}

/* A channel that fails the handshake is rejected through its transport
 * and closed from our side; the ingest's other connections go on. */
static void channel_rejected(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    char path[108];
    sock_path(path, sizeof path, "chanbad");
    ss_ingest *in = start(&loop, &s, path, 5000);
    REQUIRE(in != NULL);
    fake_transport ft = {0};
    ss_ingest_transport tr = {&ft, ft_write, ft_closed, NULL, 0, 0};
    ss_ingest_channel *ch = ss_ingest_channel_open(in, &tr);
    uint8_t buf[2048];
    size_t n = channel_script(buf, sizeof buf, 1, 1);
    ss_ingest_channel_feed(ch, buf, n);
    CHECK_EQ_INT(s.rejects, 1);
    CHECK_EQ_INT(s.hellos, 0);
    CHECK_EQ_INT(ft.closed, 1);
    wire_decoder d;
    wire_decoder_init(&d, WIRE_FROM_CONTROLLER, NULL, NULL);
    wire_frame f;
    size_t used;
    char err[128];
    CHECK(wire_decoder_next(&d, ft.out, ft.out_len, &f, &used, err,
                            sizeof err) == WIRE_OK &&
          f.type == WIRE_REJECT);
    /* a rank of another node is refused on this node's channel */
    fake_transport ft3 = {0};
    ss_ingest_transport tr3 = {&ft3, ft_write, ft_closed, NULL, 2, 2};
    ss_ingest_channel *ch3 = ss_ingest_channel_open(in, &tr3);
    n = channel_script(buf, sizeof buf, 1, 0);
    ss_ingest_channel_feed(ch3, buf, n);
    CHECK_EQ_INT(s.rejects, 2);
    CHECK(strstr(s.last_reject, "rank 1 does not run on this node") != NULL);
    CHECK_EQ_INT(ft3.closed, 1);
    /* a second channel is unaffected */
    fake_transport ft2 = {0};
    ss_ingest_transport tr2 = {&ft2, ft_write, ft_closed, NULL, 0, 0};
    ss_ingest_channel *ch2 = ss_ingest_channel_open(in, &tr2);
    n = channel_script(buf, sizeof buf, 1, 0);
    ss_ingest_channel_feed(ch2, buf, n);
    CHECK_EQ_INT(s.hellos, 1);
    CHECK_EQ_INT(s.steps, 1);
    ss_ingest_close(in); /* closes ch2 from our side */
    CHECK_EQ_INT(ft2.closed, 1);
    CHECK_EQ_INT(s.disconnects, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&s.closer, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* A command goes only to a connected rank that announced the feature;
 * the answer comes back with its marker on the controller's clock. */
static void commands_need_the_feature(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    char path[108];
    sock_path(path, sizeof path, "cmd");
    ss_ingest *in = start(&loop, &s, path, 5000);
    REQUIRE(in != NULL);
    fake_transport ft = {.offset = -1000};
    ss_ingest_transport tr = {&ft, ft_write, ft_closed, &ft.offset, 0, 0};
    ss_ingest_channel *ch = ss_ingest_channel_open(in, &tr);
    REQUIRE(ch != NULL);
    uint8_t buf[2048];
    wire_hello h = hello_of(2, 4);
    strcpy(h.host, "node1");
    size_t n = wire_encode_hello(buf, sizeof buf, &h);
    ss_ingest_channel_feed(ch, buf, n);
    REQUIRE(s.hellos == 1);
    size_t welcome_len = ft.out_len;

    wire_command cmd = {9, WIRE_COMMAND_PROFILE, 1500, "/tmp/p"};
    CHECK_EQ_INT(ss_ingest_send_command(in, 2, &cmd), SS_INGEST_UNSUPPORTED);
    CHECK_EQ_INT(ss_ingest_send_command(in, 3, &cmd),
                 SS_INGEST_NOT_CONNECTED);
    CHECK(ft.out_len == welcome_len); /* nothing sent */
    wire_features feat = {WIRE_FEATURE_PROFILE};
    n = wire_encode_features(buf, sizeof buf, &feat);
    ss_ingest_channel_feed(ch, buf, n);
    CHECK_EQ_INT(ss_ingest_send_command(in, 2, &cmd), 0);

    /* the rank's decoder reads WELCOME, then the COMMAND */
    wire_decoder d;
    wire_decoder_init(&d, WIRE_FROM_CONTROLLER, NULL, NULL);
    wire_frame f;
    size_t used, off = 0;
    char err[128];
    REQUIRE(wire_decoder_next(&d, ft.out, ft.out_len, &f, &used, err,
                              sizeof err) == WIRE_OK);
    off += used;
    REQUIRE(wire_decoder_next(&d, ft.out + off, ft.out_len - off, &f, &used,
                              err, sizeof err) == WIRE_OK);
    CHECK_EQ_INT(f.type, WIRE_COMMAND);
    CHECK_EQ_INT(f.u.command.request_id, 9);
    CHECK_STR(f.u.command.dir, "/tmp/p");

    wire_profile_done pd = {9, WIRE_PROFILE_OK, 5000, "/tmp/p/rank2.json"};
    n = wire_encode_profile_done(buf, sizeof buf, &pd);
    ss_ingest_channel_feed(ch, buf, n);
    CHECK_EQ_INT(s.profile_done, 1);
    CHECK(s.last_done.marker_ns == 4000); /* moved by the offset */
    CHECK_STR(s.last_done.text, "/tmp/p/rank2.json");

    ss_ingest_channel_gone(ch);
    CHECK_EQ_INT(ss_ingest_send_command(in, 2, &cmd),
                 SS_INGEST_NOT_CONNECTED);
    ss_ingest_close(in);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&s.closer, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* With every descriptor in use, a rank's connection cannot be accepted:
 * the ingest says so (on_accept_failed, UV_EMFILE) instead of nothing, and
 * the connection waits in the backlog: once descriptors are free again it
 * is accepted, and the rank's telemetry arrives. */
static void on_give_up(uv_timer_t *t)
{
    (void)t;
    gave_up = 1;
}

static void accept_failure_is_reported(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    s.close_after = 1;
    client c = {.rank = 1};
    sock_path(c.path, sizeof c.path, "emfile");
    REQUIRE(start(&loop, &s, c.path, 5000) != NULL);
    int go[2];
    REQUIRE(pipe(go) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) { /* a rank, with descriptors of its own */
        char x;
        if (read(go[0], &x, 1) != 1)
            _exit(2);
        run_client(&c);
        _exit(c.got_welcome ? 0 : 1);
    }
    struct rlimit saved, low;
    REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
    low = saved;
    low.rlim_cur = 256;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
    int fillers[256], n = 0;
    while (n < 256 && (fillers[n] = open("/dev/null", O_RDONLY)) >= 0)
        n++;
    CHECK_EQ_INT(errno, EMFILE);
    accept_failures = gave_up = 0;
    uv_timer_t give_up;
    uv_timer_init(&loop, &give_up);
    uv_timer_start(&give_up, on_give_up, 5000, 0);
    REQUIRE(write(go[1], "g", 1) == 1);
    while (!accept_failures && !gave_up)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&give_up, NULL);
    while (n > 0)
        close(fillers[--n]);
    setrlimit(RLIMIT_NOFILE, &saved);
    CHECK_EQ_INT(accept_failures, 1);
    CHECK_EQ_INT(accept_error, UV_EMFILE);
    CHECK_EQ_INT(s.hellos, 0);
    uv_run(&loop, UV_RUN_DEFAULT); /* accepted now: the rank's whole run */
    CHECK_EQ_INT(s.hellos, 1);
    CHECK_EQ_INT(s.byes, 1);
    int st = 0;
    waitpid(child, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(go[0]);
    close(go[1]);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* VALUES frames reach on_step with their STEP, names run-wide, NaN and
 * infinities bit for bit; a vector under a refused name is dropped and
 * counted; LABELS chunks are handed on as one set. */
static void vectors_and_labels_reach_on_step(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    char path[108];
    sock_path(path, sizeof path, "vec");
    ss_ingest *in = start(&loop, &s, path, 5000);
    REQUIRE(in != NULL);
    fake_transport ft = {.offset = 0};
    ss_ingest_transport tr = {&ft, ft_write, ft_closed, NULL, 0, 0};
    ss_ingest_channel *ch = ss_ingest_channel_open(in, &tr);
    REQUIRE(ch != NULL);
    static uint8_t buf[65536];
    wire_hello h = hello_of(1, 4);
    size_t n = wire_encode_hello(buf, sizeof buf, &h);
    wire_name nm = {5, "forward"}, nm2 = {6, "norms"}, over = {7, "over-x"};
    n += wire_encode_name(buf + n, sizeof buf - n, &nm);
    n += wire_encode_name(buf + n, sizeof buf - n, &nm2);
    n += wire_encode_name(buf + n, sizeof buf - n, &over);
    const char *labels[3] = {"layer.0", "layer.1", "layer.2"};
    n += wire_encode_labels(buf + n, sizeof buf - n, 6, 3, 0, labels, 2);
    n += wire_encode_labels(buf + n, sizeof buf - n, 6, 3, 2, labels + 2, 1);
    double a[3] = {1.5, NAN, -INFINITY}, b[2] = {INFINITY, 4};
    n += wire_encode_values(buf + n, sizeof buf - n, 1, 6, a, 3, 2);
    n += wire_encode_values(buf + n, sizeof buf - n, 1, 7, b, 2, 0);
    n += wire_encode_values(buf + n, sizeof buf - n, 1, 5, b, 2, 0);
    static wire_step st;
    memset(&st, 0, sizeof st);
    st.step = 1;
    st.begin_ns = 10;
    st.end_ns = 20;
    n += wire_encode_step(buf + n, sizeof buf - n, &st);
    ss_ingest_channel_feed(ch, buf, n);
    CHECK_EQ_INT(s.rejects, 0);
    CHECK_EQ_INT(s.steps, 1);
    CHECK_EQ_INT(s.label_sets, 1);
    CHECK_EQ_INT(s.label_name, 3);
    CHECK_EQ_INT(s.n_labels, 3);
    CHECK_STR(s.last_label, "layer.2");
    CHECK_EQ_INT(s.n_values, 2);
    CHECK_EQ_INT(s.values[0].name, 3);
    CHECK_EQ_INT(s.values[0].n, 3);
    CHECK_EQ_INT(s.values[0].truncated, 2);
    CHECK(memcmp(s.value_bits[0], a, sizeof a) == 0);
    CHECK_EQ_INT(s.values[1].name, 17);
    CHECK(isinf(s.value_bits[1][0]) && s.value_bits[1][1] == 4);
    CHECK_EQ_INT(s.values_dropped, 1); /* the vector under "over-x" */
    /* the next step carries no vectors */
    st.step = 2;
    n = wire_encode_step(buf, sizeof buf, &st);
    ss_ingest_channel_feed(ch, buf, n);
    CHECK_EQ_INT(s.steps, 2);
    CHECK_EQ_INT(s.n_values, 0);
    ss_ingest_stats stats;
    ss_ingest_get_stats(in, &stats);
    CHECK_EQ_INT(stats.vectors, 2);
    ss_ingest_channel_gone(ch);
    ss_ingest_close(in);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&s.closer, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* ---- a backlog read in step ---- */

/* A rank that, once welcomed, waits for GO, writes STEPS steps at once,
 * and with HOLD waits for RELEASE before its BYE. */
typedef struct {
    char path[108];
    uint32_t rank, steps;
    int hold;
} backlog_client;

static atomic_int bl_welcomed, bl_go, bl_written, bl_release;

static void *run_backlog_client(void *arg)
{
    backlog_client *c = arg;
    int fd = dial(c->path);
    if (fd < 0)
        return NULL;
    static _Thread_local uint8_t buf[32768];
    wire_hello h = hello_of(c->rank, 2);
    size_t n = wire_encode_hello(buf, sizeof buf, &h);
    client answer = {0};
    if (send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n)
        read_answer(&answer, fd, 0);
    atomic_fetch_add(&bl_welcomed, 1);
    while (!atomic_load(&bl_go))
        usleep(1000);
    wire_name nm = {5, "forward"};
    n = wire_encode_name(buf, sizeof buf, &nm);
    wire_step st;
    memset(&st, 0, sizeof st);
    st.n_phases = 1;
    st.phases[0] = (wire_phase){5, 1, 1, 1, 0};
    for (uint32_t i = 1; i <= c->steps; i++) {
        st.step = i;
        st.begin_ns = i * 10;
        st.end_ns = i * 10 + 5;
        n += wire_encode_step(buf + n, sizeof buf - n, &st);
    }
    int ok = send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n;
    atomic_fetch_add(&bl_written, 1);
    while (ok && c->hold && !atomic_load(&bl_release))
        usleep(1000);
    wire_bye b = {1};
    n = wire_encode_bye(buf, sizeof buf, &b);
    if (ok)
        (void)!send(fd, buf, n, MSG_NOSIGNAL);
    close(fd);
    return NULL;
}

/* Runs LOOP without blocking until *DONE(S) or 20 s pass. */
static int run_until(uv_loop_t *loop, seen *s, int (*done)(const seen *))
{
    for (int i = 0; i < 20000; i++) {
        if (done(s))
            return 1;
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    return done(s);
}

static int both_welcomed(const seen *s)
{
    return s->hellos == 2 && atomic_load(&bl_welcomed) == 2;
}

static int held_rank_passed(const seen *s)
{
    return s->steps == 203;
}

/* Two ranks whose records all wait in their sockets when the loop runs
 * again (a controller that could not run): rank 0 with STEPS0 steps,
 * rank 1 with STEPS1, held open after them with HOLD1; with HOLD_FIRST
 * their first steps go through t_first_step's hold.  Fills S. */
static void backlog_job(uint32_t lead, uint32_t steps0, uint32_t steps1,
                        int hold1, int hold_first, seen *s)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    memset(s, 0, sizeof *s);
    s->hold_first = hold_first;
    s->close_after = 2;
    atomic_store(&bl_welcomed, 0);
    atomic_store(&bl_go, 0);
    atomic_store(&bl_written, 0);
    atomic_store(&bl_release, 0);
    backlog_client c[2] = {{.rank = 0, .steps = steps0},
                           {.rank = 1, .steps = steps1, .hold = hold1}};
    sock_path(c[0].path, sizeof c[0].path, "backlog");
    memcpy(c[1].path, c[0].path, sizeof c[1].path);
    max_lead = lead;
    REQUIRE(start(&loop, s, c[0].path, 5000) != NULL);
    max_lead = 0;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, run_backlog_client, &c[i]);
    REQUIRE(run_until(&loop, s, both_welcomed));
    /* the loop stands still while both write */
    atomic_store(&bl_go, 1);
    for (int i = 0; i < 20000 && atomic_load(&bl_written) < 2; i++)
        usleep(1000);
    REQUIRE(atomic_load(&bl_written) == 2);
    if (hold1)
        CHECK(run_until(&loop, s, held_rank_passed));
    atomic_store(&bl_release, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* Both ranks' backlogs are read in step: neither gets more than the lead
 * (and the step that passed it) ahead of the other, where without it one
 * rank's whole backlog comes first.  A rank that is really behind, with
 * nothing unread, holds nobody back. */
static void a_backlog_is_read_in_step(void)
{
    seen s;
    backlog_job(0, 200, 200, 0, 0, &s);
    CHECK_EQ_INT(s.steps, 400);
    CHECK(s.most_ahead > 100); /* the backlog is real */
    CHECK_EQ_INT(s.stats.lead_waits, 0);

    backlog_job(8, 200, 200, 0, 0, &s);
    CHECK_EQ_INT(s.steps, 400);
    CHECK(s.most_ahead <= 9);
    if (s.most_ahead > 9)
        fprintf(stderr, "  a rank was %lld steps ahead\n",
                (long long)s.most_ahead);
    CHECK(s.stats.lead_waits >= 1);
    CHECK_EQ_INT(s.byes, 2);

    /* rank 1 stops after 3 steps and stays connected: rank 0's 200 steps
     * all pass before rank 1 says anything more */
    backlog_job(8, 200, 3, 1, 0, &s);
    CHECK_EQ_INT(s.steps, 203);
    CHECK_EQ_INT(s.latest[0], 200);
}

/* The first rank's first step held (on_first_step) until the other
 * rank's is asked: none of its steps goes before, none is lost, and the
 * offset given moves every step of that rank's connection. */
static void a_first_step_is_held_and_moved(void)
{
    seen s;
    backlog_job(0, 50, 50, 0, 1, &s);
    CHECK_EQ_INT(s.steps, 100);
    /* one was held, then asked again; the other asked once */
    CHECK_EQ_INT(s.first_asked[0] + s.first_asked[1], 3);
    int held = s.first_asked[1] == 2;
    CHECK_EQ_INT(s.first_asked[held], 2);
    CHECK(!s.early[held]);
    CHECK_EQ_INT(s.first_of[0], 1);
    CHECK_EQ_INT(s.first_of[1], 101);
    CHECK_EQ_INT(s.latest[0], 50);
    CHECK_EQ_INT(s.latest[1], 150);
    CHECK_EQ_INT(s.byes, 2);
}

TEST_LIST(TEST(accepts_and_translates), TEST(commands_need_the_feature),
          TEST(a_first_step_is_held_and_moved),
          TEST(vectors_and_labels_reach_on_step),
          TEST(a_refused_name_drops_its_values_not_the_rank),
          TEST(rejection_spares_others),
          TEST(controller_refusal_is_sent), TEST(silent_peer_times_out),
          TEST(channel_fed_byte_by_byte), TEST(channel_fed_at_once),
          TEST(channel_rejected), TEST(accept_failure_is_reported),
          TEST(a_backlog_is_read_in_step))
