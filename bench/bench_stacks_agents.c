/*
 * bench_stacks_agents.c - `stepscope stacks` of thousands of ranks across
 * many nodes (docs/performance.md, "Every rank's stacks").
 *
 * Starts a real controller (`stepscope run --nnodes N+1 --node-rank 0`,
 * its dashboard on loopback) whose node 0 runs M plain Python ranks asleep
 * in wait_for_peers(), and plays the other N nodes itself: N agent links
 * over real TCP made with the link's own code (link_conn.h for the framed,
 * MACed stream, link_auth.h for the handshake, clock_sync.h for the
 * clock), all on one libuv loop in a thread of their own.  Each simulated
 * agent answers STACKS_REQ, after --collect-ms (the time a real agent's
 * collector takes for its ranks), with one object per rank in the
 * collector's exchange format (stack_collect.h): a main thread of about 32
 * frames of a pipelined transformer's step waiting in an all-gather and a
 * pin-memory thread, the same for every rank but three (one in the data
 * loader, one in the attention's softmax, one writing a checkpoint), as a
 * real hang looks.  --silent K agents (the last K nodes) never answer.
 *
 * Then it runs `stepscope stacks --db STORE` --reps times and times each
 * whole command (process start, the request out, every node's answer in,
 * the merged text printed), with the controller's CPU time and RSS around
 * each, checks the text (the outliers first, each alone; the rest in one
 * group; with --silent, the silent nodes named), and prints the median,
 * p90 and max.
 *
 *   bench_stacks_agents --agents 64 --ranks 64 --reps 15
 *   bench_stacks_agents --agents 64 --ranks 64 --reps 5 --silent 1
 *
 * Exit status 0 when every answer was as expected.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "bench_agent_support.h"
#include "clock_sync.h"
#include "json.h"
#include "link_auth.h"
#include "link_conn.h"
#include "link_wire.h"

#define JOB_ID "bench-stacks-agents"
#define MAX_REPS 1000

typedef struct {
    uint32_t agents, ranks, reps, silent, collect_ms;
    unsigned port;
    const char *stepscope, *dir;
    int keep;
} options;

static options o = {64, 64, 15, 0, 10, 29740, NULL, NULL, 0};
static link_secret g_secret;
static atomic_uint g_joined;     /* agents past JOIN_OK and their clock */
static atomic_int g_failed;
static atomic_int g_stopping; /* the controller is being stopped */
static char g_fail_why[256];

/* The three ranks that are elsewhere, as in a real hang; all on agents. */
static uint32_t g_outlier[3];

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void failed(const char *why, uint32_t node)
{
    if (!atomic_exchange(&g_failed, 1))
        snprintf(g_fail_why, sizeof g_fail_why, "node %u: %s", node, why);
}

/* ---- the ranks' stacks ---- */

typedef struct {
    const char *func, *file;
    int line;
} frame;

#define TORCH "/usr/lib/python3/dist-packages/torch/"
#define MEG "/workspace/megatron/core/"

/* The call path of most ranks, outermost first; the leaf is the wait. */
static const frame k_common[] = {
    {"<module>", "/workspace/pretrain_gpt.py", 412},
    {"pretrain", "/workspace/megatron/training/training.py", 286},
    {"train", "/workspace/megatron/training/training.py", 1107},
    {"train_step", "/workspace/megatron/training/training.py", 598},
    {"forward_backward_pipelining_without_interleaving",
     MEG "pipeline_parallel/schedules.py", 1285},
    {"forward_step", MEG "pipeline_parallel/schedules.py", 193},
    {"forward_step", "/workspace/pretrain_gpt.py", 188},
    {"_call_impl", TORCH "nn/modules/module.py", 1501},
    {"forward", TORCH "nn/parallel/distributed.py", 1156},
    {"_run_ddp_forward", TORCH "nn/parallel/distributed.py", 1110},
    {"_call_impl", TORCH "nn/modules/module.py", 1501},
    {"forward", MEG "models/gpt/gpt_model.py", 243},
    {"_call_impl", TORCH "nn/modules/module.py", 1501},
    {"forward", MEG "transformer/transformer_block.py", 411},
    {"_checkpointed_forward", MEG "transformer/transformer_block.py", 302},
    {"checkpoint", MEG "tensor_parallel/random.py", 301},
    {"apply", TORCH "autograd/function.py", 506},
    {"forward", MEG "tensor_parallel/random.py", 240},
    {"custom_forward", MEG "transformer/transformer_block.py", 281},
    {"_call_impl", TORCH "nn/modules/module.py", 1501},
    {"forward", MEG "transformer/transformer_layer.py", 178},
    {"_call_impl", TORCH "nn/modules/module.py", 1501},
    {"forward", MEG "transformer/attention.py", 269},
    {"_call_impl", TORCH "nn/modules/module.py", 1501},
    {"forward", MEG "tensor_parallel/layers.py", 744},
    {"linear_with_grad_accumulation_and_async_allreduce",
     MEG "tensor_parallel/layers.py", 548},
    {"decorate_fwd", TORCH "cuda/amp/autocast_mode.py", 106},
    {"forward", MEG "tensor_parallel/layers.py", 321},
    {"_all_gather_base", TORCH "distributed/distributed_c10d.py", 2511},
    {"all_gather_into_tensor", TORCH "distributed/distributed_c10d.py",
     2897},
    {"wrapper", TORCH "distributed/c10d_logger.py", 72},
    {"wait", TORCH "distributed/distributed_c10d.py", 2900},
};
#define N_COMMON (sizeof k_common / sizeof *k_common)

/* Outlier 0: waits for a batch from the data loader after train_step. */
static const frame k_loader[] = {
    {"get_batch", "/workspace/pretrain_gpt.py", 131},
    {"__next__", TORCH "utils/data/dataloader.py", 633},
    {"_next_data", TORCH "utils/data/dataloader.py", 1328},
    {"_get_data", TORCH "utils/data/dataloader.py", 1294},
    {"_try_get_data", TORCH "utils/data/dataloader.py", 1132},
    {"get", "/usr/lib/python3.11/queue.py", 180},
    {"wait", "/usr/lib/python3.11/threading.py", 324},
};
/* Outlier 1: in the attention's softmax, below attention.py. */
static const frame k_softmax[] = {
    {"_call_impl", TORCH "nn/modules/module.py", 1501},
    {"forward", MEG "transformer/dot_product_attention.py", 183},
    {"_call_impl", TORCH "nn/modules/module.py", 1501},
    {"forward", MEG "fusions/fused_softmax.py", 148},
    {"forward_torch_softmax", MEG "fusions/fused_softmax.py", 201},
};
/* Outlier 2: writes a checkpoint after train. */
static const frame k_ckpt[] = {
    {"save_checkpoint", "/workspace/megatron/training/checkpointing.py", 391},
    {"save", TORCH "serialization.py", 441},
    {"_save", TORCH "serialization.py", 668},
    {"write_record", TORCH "serialization.py", 415},
};
static const frame k_pin[] = {
    {"_bootstrap", "/usr/lib/python3.11/threading.py", 995},
    {"_bootstrap_inner", "/usr/lib/python3.11/threading.py", 1038},
    {"run", "/usr/lib/python3.11/threading.py", 975},
    {"_pin_memory_loop", TORCH "utils/data/_utils/pin_memory.py", 51},
    {"do_one_step", TORCH "utils/data/_utils/pin_memory.py", 28},
    {"get", "/usr/lib/python3.11/queue.py", 180},
    {"wait", "/usr/lib/python3.11/threading.py", 324},
};

static void put_frames(ss_buf *b, const frame *f, size_t n, int first)
{
    for (size_t i = 0; i < n; i++) {
        ss_buf_puts(b, first && i == 0 ? "{\"func\":" : ",{\"func\":");
        ss_buf_json_str(b, f[i].func);
        ss_buf_puts(b, ",\"file\":");
        ss_buf_json_str(b, f[i].file);
        ss_buf_printf(b, ",\"line\":%d}", f[i].line);
    }
}

/* Appends ,"code":CODE} to the last frame B holds. */
static void leaf_code(ss_buf *b, const char *code)
{
    b->len--; /* the last frame's '}' */
    ss_buf_puts(b, ",\"code\":");
    ss_buf_json_str(b, code);
    ss_buf_puts(b, "}");
}

/* RANK's object as node NODE's collector writes it. */
static void rank_object(uint32_t rank, uint32_t node, ss_buf *b)
{
    ss_buf_printf(b, "{\"rank\":%u,\"host\":\"sim%u\",\"pid\":%u,"
                  "\"state\":\"ok\",\"via\":\"memory\",\"why\":null,"
                  "\"threads\":[{\"id\":\"0x7f%08x\",\"current\":false,"
                  "\"frames\":[", rank, node, 100000 + rank, rank * 4096);
    put_frames(b, k_pin, sizeof k_pin / sizeof *k_pin, 1);
    leaf_code(b, "gotit = waiter.acquire(True, timeout)");
    ss_buf_printf(b, "]},{\"id\":\"0x7f%08x\",\"current\":false,"
                  "\"frames\":[", rank * 4096 + 1);
    if (rank == g_outlier[0]) {
        put_frames(b, k_common, 4, 1);
        put_frames(b, k_loader, sizeof k_loader / sizeof *k_loader, 0);
        leaf_code(b, "waiter.acquire()");
    } else if (rank == g_outlier[1]) {
        put_frames(b, k_common, 23, 1);
        put_frames(b, k_softmax, sizeof k_softmax / sizeof *k_softmax, 0);
        leaf_code(b, "probs = self.scale_mask_softmax(scores, mask)");
    } else if (rank == g_outlier[2]) {
        put_frames(b, k_common, 3, 1);
        put_frames(b, k_ckpt, sizeof k_ckpt / sizeof *k_ckpt, 0);
        leaf_code(b, "self.file_like.write_record(name, buf, nbytes)");
    } else {
        put_frames(b, k_common, N_COMMON, 1);
        leaf_code(b, "work.wait()");
    }
    ss_buf_puts(b, "]}]}");
}

/* ---- the simulated agents: one loop, the link's own code ---- */

typedef struct {
    uint32_t node;
    ss_link_conn *conn;
    uv_connect_t connect;
    uv_timer_t timer; /* heartbeats; the collection's delay */
    uv_timer_t answer;
    link_agent_hello hello;
    uint8_t key[LINK_KEY_SIZE];
    ss_clock_sync clock;
    int joined, silent;
    unsigned ticks;
    uint32_t request_id;
    char **objects; /* its ranks' objects, made once */
} agent;

static uv_loop_t g_loop;
static uv_async_t g_stop;
static agent *g_agents;

static void send_frame(agent *a, const link_frame *f)
{
    if (ss_link_conn_send(a->conn, f) != 0)
        failed("a frame could not be sent", a->node);
}

static void send_time_req(agent *a)
{
    link_frame t = {.type = LINK_TIME_REQ};
    t.u.time_req.t1 = mono_ns();
    send_frame(a, &t);
}

/* The ranks' objects, as STACKS_PART chunks, as agent_stacks.c sends. */
static void on_answer(uv_timer_t *t)
{
    agent *a = t->data;
    for (uint32_t i = 0; i < o.ranks; i++) {
        const char *text = a->objects[i];
        size_t len = strlen(text), off = 0;
        do {
            size_t n = len - off < LINK_MAX_STACKS_CHUNK
                           ? len - off : LINK_MAX_STACKS_CHUNK;
            link_frame f = {.type = LINK_STACKS_PART};
            f.u.stacks_part = (link_stacks_part){
                a->request_id, a->node * o.ranks + i, off + n == len,
                (uint32_t)n, (const uint8_t *)text + off};
            send_frame(a, &f);
            off += n;
        } while (off < len);
    }
}

static int agent_connect(agent *a);

/* Every 200 ms: a connection again while the controller is not yet
 * listening; a heartbeat every second once joined. */
static void on_tick(uv_timer_t *t)
{
    agent *a = t->data;
    if (!a->conn && !a->joined && agent_connect(a) != 0)
        failed("cannot start its link", a->node);
    link_frame hb = {.type = LINK_HEARTBEAT};
    if (a->joined && a->conn && ++a->ticks % 5 == 0)
        send_frame(a, &hb);
}

static void on_frame(void *ctx, const link_frame *f)
{
    agent *a = ctx;
    switch (f->type) {
    case LINK_CHALLENGE: {
        uint8_t want[LINK_PROOF_SIZE];
        link_auth_controller_proof(&g_secret, &a->hello,
                                   f->u.challenge.nonce, want);
        if (!link_auth_proof_equal(want, f->u.challenge.proof)) {
            failed("the controller's proof is wrong", a->node);
            return;
        }
        link_frame p = {.type = LINK_PROOF};
        link_auth_agent_proof(&g_secret, &a->hello, f->u.challenge.nonce,
                              p.u.proof.proof);
        send_frame(a, &p);
        link_auth_session_key(&g_secret, &a->hello, f->u.challenge.nonce,
                              a->key);
        ss_link_conn_keyed(a->conn, a->key);
        return;
    }
    case LINK_JOIN_OK:
        if (f->u.join_ok.world_size != (o.agents + 1) * o.ranks)
            failed("the controller's world size differs", a->node);
        ss_clock_sync_init(&a->clock);
        send_time_req(a);
        return;
    case LINK_JOIN_REJECT:
        failed(f->u.join_reject.reason, a->node);
        return;
    case LINK_TIME_RESP: {
        const link_time_resp *r = &f->u.time_resp;
        if (ss_clock_sync_add(&a->clock, r->t1, r->t2, r->t3, mono_ns()) != 1) {
            send_time_req(a);
            return;
        }
        ss_clock_estimate e;
        if (ss_clock_sync_estimate(&a->clock, mono_ns(), &e) != 0) {
            failed("no clock estimate", a->node);
            return;
        }
        link_frame c = {.type = LINK_CLOCK};
        c.u.clock = (link_clock){e.offset_ns, e.bound_ns, e.rtt_ns,
                                 e.samples};
        send_frame(a, &c);
        if (!a->joined) {
            a->joined = 1;
            atomic_fetch_add(&g_joined, 1);
        }
        return;
    }
    case LINK_STACKS_REQ:
        if (a->silent)
            return;
        a->request_id = f->u.stacks_req.request_id;
        uv_timer_start(&a->answer, on_answer, o.collect_ms, 0);
        return;
    case LINK_STOP: {
        link_frame all = {.type = LINK_ALL_EXITED};
        link_frame bye = {.type = LINK_BYE};
        send_frame(a, &all);
        send_frame(a, &bye);
        return;
    }
    default:
        return;
    }
}

static void on_end(void *ctx, ss_link_end end, const char *why)
{
    agent *a = ctx;
    (void)end;
    if (!atomic_load(&g_failed) && !atomic_load(&g_stopping))
        fprintf(stderr, "bench_stacks_agents: node %u: the link ended: %s\n",
                a->node, why);
}

static void on_closed(void *ctx)
{
    agent *a = ctx;
    a->conn = NULL;
}

static void on_connected(uv_connect_t *req, int status)
{
    agent *a = req->data;
    if (status != 0 || !a->conn) {
        ss_link_conn_close(a->conn, 0); /* on_tick tries again */
        return;
    }
    uv_tcp_nodelay(ss_link_conn_tcp(a->conn), 1);
    if (ss_link_conn_start(a->conn) != 0)
        return;
    link_frame f = {.type = LINK_AGENT_HELLO};
    f.u.hello = a->hello;
    send_frame(a, &f);
}

static int agent_connect(agent *a)
{
    ss_link_conn_config cfg = {.sends = LINK_FROM_AGENT};
    ss_link_conn_callbacks cb = {a, on_frame, on_end, on_closed};
    a->conn = ss_link_conn_new(&g_loop, &cfg, &cb);
    if (!a->conn)
        return -1;
    /* Each node from its own loopback address, as real nodes are: the
     * controller lets only a few handshakes wait per address. */
    struct sockaddr_in me = {.sin_family = AF_INET}, to;
    me.sin_addr.s_addr = htonl(0x7f000000u | (1u + a->node / 250) << 8 |
                               (1u + a->node % 250));
    uv_ip4_addr("127.0.0.1", (int)o.port + 1, &to);
    uv_tcp_t *tcp = ss_link_conn_tcp(a->conn);
    a->connect.data = a;
    if (uv_tcp_bind(tcp, (struct sockaddr *)&me, 0) != 0 ||
        uv_tcp_connect(&a->connect, tcp, (struct sockaddr *)&to,
                       on_connected) != 0) {
        ss_link_conn_close(a->conn, 0);
        return -1;
    }
    return 0;
}

static void agent_start(agent *a)
{
    bench_agent_hello(&a->hello, a->node, o.agents + 1, o.ranks, JOB_ID);
    uv_timer_init(&g_loop, &a->timer);
    uv_timer_init(&g_loop, &a->answer);
    a->timer.data = a->answer.data = a;
    uv_timer_start(&a->timer, on_tick, 0, 200);
}

static void on_stop(uv_async_t *h)
{
    for (uint32_t i = 0; i < o.agents; i++) {
        ss_link_conn_close(g_agents[i].conn, 0);
        uv_close((uv_handle_t *)&g_agents[i].timer, NULL);
        uv_close((uv_handle_t *)&g_agents[i].answer, NULL);
    }
    uv_close((uv_handle_t *)h, NULL);
}

/* The controller is up: the agents connect, with a retry while it starts
 * listening. */
static void *loop_main(void *arg)
{
    (void)arg;
    for (uint32_t i = 0; i < o.agents; i++)
        agent_start(&g_agents[i]);
    uv_run(&g_loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---- the controller and the commands ---- */

static pid_t start_controller(const char *token, const char *db,
                              const char *log, const char *rank_py)
{
    char nn[16], np[16], port[16];
    snprintf(nn, sizeof nn, "%u", o.agents + 1);
    snprintf(np, sizeof np, "%u", o.ranks);
    snprintf(port, sizeof port, "%u", o.port);
    const char *argv[] = {
        o.stepscope, "run", "--nnodes", nn, "--node-rank", "0",
        "--master-addr", "127.0.0.1", "--master-port", port, "-n", np,
        "--token-file", token, "--job-id", JOB_ID, "--db", db,
        "--join-timeout", "60", "--", "/usr/bin/python3", rank_py, NULL};
    return bench_spawn_logged(log, (char *const *)argv);
}

/* `stepscope stacks --db DB` into OUT_PATH; its exit status, or -1. */
static int run_stacks(const char *db, const char *out_path)
{
    pid_t pid = fork();
    if (pid == 0) {
        char err_path[PATH_MAX + 8];
        snprintf(err_path, sizeof err_path, "%s.err", out_path);
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int efd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0)
            dup2(fd, 1);
        if (efd >= 0)
            dup2(efd, 2);
        execl(o.stepscope, o.stepscope, "stacks", "--db", db, (char *)NULL);
        _exit(127);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    ss_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        ss_buf_add(&b, chunk, n);
    fclose(f);
    *len = b.len;
    return b.data;
}

/* Counts of what the text says: answered/total from the first line, the
 * ranks of the first three groups, the fourth... One line of WHY when it
 * is not as expected. */
static int check_text(const char *text, uint32_t world, char *why,
                      size_t whylen)
{
    unsigned answered = 0, total = 0;
    if (!text || sscanf(text, "stacks of run %*d: %u of %u", &answered,
                        &total) != 2) {
        snprintf(why, whylen, "no first line");
        return -1;
    }
    uint32_t silent_ranks = o.silent * o.ranks;
    if (total != world || answered != world - silent_ranks) {
        snprintf(why, whylen, "%u of %u ranks answered", answered, total);
        return -1;
    }
    const char *line = strchr(text, '\n');
    /* The three outliers first, each alone (ties by the lowest rank). */
    for (int k = 0; k < 3; k++) {
        char want[32];
        snprintf(want, sizeof want, "\nrank %u (1): ", g_outlier[k]);
        if (!line || strncmp(line, want, strlen(want)) != 0) {
            snprintf(why, whylen, "line %d is not rank %u's alone", k + 2,
                     g_outlier[k]);
            return -1;
        }
        line = strchr(line + 1, '\n');
    }
    for (uint32_t k = 0; k < o.silent; k++) {
        char want[64];
        snprintf(want, sizeof want, "node %u did not answer within",
                 o.agents - k);
        if (!strstr(text, want)) {
            snprintf(why, whylen, "node %u's silence is not named",
                     o.agents - k);
            return -1;
        }
    }
    return 0;
}

/* 1 when nothing listens on loopback port PORT now. */
static int port_free(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* A master port P with P and P + 1 (the agents') free, or 0. */
static unsigned free_port_pair(void)
{
    uint8_t r[2];
    for (int i = 0; i < 200; i++) {
        link_random(r, sizeof r);
        unsigned p = 20000 + ((unsigned)r[0] << 8 | r[1]) % 40000;
        if (port_free(p) && port_free(p + 1))
            return p;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_stacks_agents [--agents N] [--ranks M] [--reps R]\n"
            "           [--silent K] [--collect-ms MS] [--port P (0: any "
            "free)]\n"
            "           [--stepscope PATH] [--dir DIR] [--keep]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"agents", required_argument, NULL, 'a'},
        {"ranks", required_argument, NULL, 'r'},
        {"reps", required_argument, NULL, 'n'},
        {"silent", required_argument, NULL, 's'},
        {"collect-ms", required_argument, NULL, 'c'},
        {"port", required_argument, NULL, 'p'},
        {"stepscope", required_argument, NULL, 'x'},
        {"dir", required_argument, NULL, 'd'},
        {"keep", no_argument, NULL, 'k'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'a': o.agents = (uint32_t)atoi(optarg); break;
        case 'r': o.ranks = (uint32_t)atoi(optarg); break;
        case 'n': o.reps = (uint32_t)atoi(optarg); break;
        case 's': o.silent = (uint32_t)atoi(optarg); break;
        case 'c': o.collect_ms = (uint32_t)atoi(optarg); break;
        case 'p': o.port = (unsigned)atoi(optarg); break;
        case 'x': o.stepscope = optarg; break;
        case 'd': o.dir = optarg; break;
        case 'k': o.keep = 1; break;
        default: usage();
        }
    }
    /* the outliers' nodes (1, 1 + N/3, 1 + 2N/3) answer */
    if (o.agents < 3 || !o.ranks || !o.reps || o.reps > MAX_REPS ||
        o.silent + 1 + 2 * o.agents / 3 > o.agents || o.port > 65534)
        usage();
    char self[PATH_MAX], ss[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    if (!o.stepscope) { /* build/bench/x -> build/stepscope */
        snprintf(ss, sizeof ss, "%s", self);
        char *slash = strrchr(ss, '/');
        *slash = 0;
        slash = strrchr(ss, '/');
        snprintf(slash ? slash + 1 : ss,
                 sizeof ss - (size_t)(slash ? slash + 1 - ss : 0),
                 "stepscope");
        o.stepscope = ss;
    }
    uint32_t world = (o.agents + 1) * o.ranks;
    /* outliers on three different answering agents, none on node 0 */
    g_outlier[0] = 1 * o.ranks + 17 % o.ranks;
    g_outlier[1] = (1 + o.agents / 3) * o.ranks + 900 % o.ranks;
    g_outlier[2] = (1 + 2 * o.agents / 3) * o.ranks + 3001 % o.ranks;

    char dir[PATH_MAX], token[PATH_MAX + 16], db[PATH_MAX + 16],
        log[PATH_MAX + 16], rank_py[PATH_MAX + 16], out[PATH_MAX + 16];
    if (bench_work_dir(dir, sizeof dir, o.dir, "bench_stacks_agents") != 0)
        return 1;
    snprintf(token, sizeof token, "%s/token", dir);
    snprintf(db, sizeof db, "%s/store.db", dir);
    snprintf(log, sizeof log, "%s/controller.log", dir);
    snprintf(rank_py, sizeof rank_py, "%s/rank.py", dir);
    snprintf(out, sizeof out, "%s/stacks.txt", dir);
    unlink(db);
    FILE *rf = fopen(rank_py, "w");
    if (!rf || fputs("import time\n\n\ndef wait_for_peers():\n"
                     "    time.sleep(1e6)\n\n\nwait_for_peers()\n", rf) < 0 ||
        fclose(rf) != 0) {
        perror("bench_stacks_agents: rank.py");
        return 1;
    }
    if (bench_token_file(token, &g_secret, "bench_stacks_agents") != 0)
        return 1;
    if (o.port == 0 && (o.port = free_port_pair()) == 0) {
        fprintf(stderr, "bench_stacks_agents: no free port pair\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);

    /* every agent's objects, made once */
    g_agents = calloc(o.agents, sizeof *g_agents);
    size_t object_bytes = 0;
    for (uint32_t i = 0; g_agents && i < o.agents; i++) {
        agent *a = &g_agents[i];
        a->node = i + 1;
        a->silent = a->node > o.agents - o.silent;
        a->objects = calloc(o.ranks, sizeof *a->objects);
        for (uint32_t k = 0; a->objects && k < o.ranks; k++) {
            ss_buf b = {0};
            rank_object(a->node * o.ranks + k, a->node, &b);
            a->objects[k] = b.data;
            object_bytes += b.len;
            if (b.oom)
                return 1;
        }
        if (!a->objects)
            return 1;
    }
    printf("bench_stacks_agents: %u agents x %u ranks + node 0's %u = %u "
           "ranks; %.1f KiB of stacks a rank (%.1f MiB in all); the agents "
           "answer after %u ms%s\n",
           o.agents, o.ranks, o.ranks, world,
           object_bytes / 1024.0 / ((double)o.agents * o.ranks),
           object_bytes / 1048576.0, o.collect_ms,
           o.silent ? "; some never do" : "");
    printf("outliers: ranks %u (data loader), %u (softmax), %u "
           "(checkpoint); silent nodes: %u\n", g_outlier[0], g_outlier[1],
           g_outlier[2], o.silent);
    fflush(stdout);

    pid_t ctl = start_controller(token, db, log, rank_py);
    if (ctl < 0) {
        perror("bench_stacks_agents: fork");
        return 1;
    }
    uv_loop_init(&g_loop);
    uv_async_init(&g_loop, &g_stop, on_stop);
    pthread_t loop_thread;
    pthread_create(&loop_thread, NULL, loop_main, NULL);

    /* every agent joined, and every rank answers */
    int rc = 1;
    char why[200] = "";
    int64_t deadline = mono_ns() + 180 * 1000000000LL;
    size_t len = 0;
    char *text = NULL;
    int ready = 0;
    while (!ready && mono_ns() < deadline && !atomic_load(&g_failed) &&
           waitpid(ctl, NULL, WNOHANG) == 0) {
        usleep(500000);
        if (atomic_load(&g_joined) < o.agents)
            continue;
        run_stacks(db, out);
        free(text);
        text = slurp(out, &len);
        ready = check_text(text, world, why, sizeof why) == 0;
    }
    if (!ready) {
        fprintf(stderr, "bench_stacks_agents: never ready (%u of %u agents "
                "joined): %s%s\n", atomic_load(&g_joined), o.agents,
                atomic_load(&g_failed) ? g_fail_why : why,
                text ? "; the last answer:" : "");
        if (text)
            fprintf(stderr, "%.2000s\n", text);
        FILE *lf = fopen(log, "r");
        char line[512];
        fprintf(stderr, "the controller's log:\n");
        for (int k = 0; lf && k < 40 && fgets(line, sizeof line, lf); k++)
            fprintf(stderr, "  %s", line);
        if (lf)
            fclose(lf);
        goto out;
    }

    static double wall[MAX_REPS], inner[MAX_REPS], cpu[MAX_REPS],
        rss[MAX_REPS], gen[MAX_REPS];
    double hwm = 0;
    size_t text_len = 0;
    printf("\n  rep  command ms  controller ms  controller CPU ms  "
           "RSS MiB  generator CPU ms\n");
    uint32_t bad = 0;
    for (uint32_t r = 0; r < o.reps; r++) {
        double c0 = 0, c1 = 0, g0 = bench_self_cpu_s();
        bench_proc_cpu_s(ctl, &c0);
        int64_t t0 = mono_ns();
        int st = run_stacks(db, out);
        wall[r] = (mono_ns() - t0) / 1e6;
        bench_proc_cpu_s(ctl, &c1);
        gen[r] = (bench_self_cpu_s() - g0) * 1e3;
        cpu[r] = (c1 - c0) * 1e3;
        bench_mem m = bench_proc_mem(ctl);
        rss[r] = m.rss;
        hwm = m.hwm > hwm ? m.hwm : hwm;
        free(text);
        text = slurp(out, &len);
        text_len = len;
        inner[r] = -1;
        if (text)
            sscanf(text, "stacks of run %*d: %*u of %*u ranks answered in "
                   "%lf ms", &inner[r]);
        if (st != (o.silent ? 3 : 0) ||
            check_text(text, world, why, sizeof why) != 0) {
            fprintf(stderr, "bench_stacks_agents: rep %u: exit %d: %s\n", r,
                    st, why[0] ? why : "");
            bad++;
        }
        printf("  %3u  %10.0f  %13.0f  %16.0f  %7.1f  %16.0f\n", r, wall[r],
               inner[r], cpu[r], rss[r], gen[r]);
        fflush(stdout);
    }
    double rss_last = rss[o.reps - 1];
    printf("\n%u ranks (%u agents x %u + node 0's %u), %u requests, "
           "%zu bytes of text each:\n", world, o.agents, o.ranks, o.ranks,
           o.reps, text_len);
    printf("  command (stepscope stacks, end to end): median %.0f ms, p90 "
           "%.0f, max %.0f\n", pct(wall, o.reps, 0.5), pct(wall, o.reps, 0.9),
           pct(wall, o.reps, 1.0));
    printf("  controller (request to document):       median %.0f ms, p90 "
           "%.0f, max %.0f\n", pct(inner, o.reps, 0.5),
           pct(inner, o.reps, 0.9), pct(inner, o.reps, 1.0));
    printf("  controller CPU per request:              median %.0f ms, p90 "
           "%.0f, max %.0f\n", pct(cpu, o.reps, 0.5), pct(cpu, o.reps, 0.9),
           pct(cpu, o.reps, 1.0));
    printf("  controller RSS: %.1f MiB after the last request, peak %.1f "
           "MiB\n", rss_last, hwm);
    printf("  generator CPU per request (the agents' frames, this process): "
           "median %.0f ms\n", pct(gen, o.reps, 0.5));
    printf("  the merged text (last request), first lines:\n");
    const char *p = text;
    for (int k = 0; p && k < 8; k++) {
        const char *e = strchr(p, '\n');
        if (!e)
            break;
        printf("    %.*s\n", (int)(e - p > 200 ? 200 : e - p), p);
        p = e + 1;
    }
    rc = bad ? 1 : 0;
    if (bad)
        printf("%u of %u requests gave a wrong answer\n", bad, o.reps);
out:
    free(text);
    atomic_store(&g_stopping, 1);
    kill(ctl, SIGTERM);
    int st = 0;
    for (int i = 0; i < 300 && waitpid(ctl, &st, WNOHANG) == 0; i++)
        usleep(100000);
    if (waitpid(ctl, &st, WNOHANG) == 0) {
        kill(ctl, SIGKILL);
        waitpid(ctl, &st, 0);
    }
    uv_async_send(&g_stop);
    pthread_join(loop_thread, NULL);
    uv_loop_close(&g_loop);
    for (uint32_t i = 0; i < o.agents; i++) {
        for (uint32_t k = 0; g_agents[i].objects && k < o.ranks; k++)
            free(g_agents[i].objects[k]);
        free(g_agents[i].objects);
    }
    free(g_agents);
    if (!o.keep && !o.dir)
        bench_remove_tree(dir);
    else
        printf("kept %s\n", dir);
    return rc;
}
