/*
 * http_test.c - unit tests for the HTTP server (http.c).
 *
 * Starts the server on 127.0.0.1 port 0 over a small store and talks to it
 * with a tiny HTTP/1.0 client over a socket: every endpoint answers JSON,
 * bad requests get 4xx with {"error":...}, the token is demanded when the
 * server listens beyond loopback (bound to 0.0.0.0, reached over
 * loopback), the event stream delivers steps, findings and its end, the
 * dashboard's files are served, busy ports fail or fall back, and the
 * live-run file is written and removed.  Hostile clients: numbers are
 * strict (no blanks, signs, %00 or trailing bytes), 300 idle connections
 * do not delay a real request, a request that trickles in is cut at its
 * deadline, connections over the limits get 503 with a JSON body, and
 * documents that take seconds to build hold no other request.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "http_gate.h"
#include "live.h"
#include <math.h>

#include "objects.h"
#include "store.h"
#include "testing.h"
#include "testing_tmp.h"

/* ---- fixture ---- */

#define MS 1000000LL

static const char *const names_[] = {"forward", "grad/norm"};

/* A finalized step of 2 ranks taking 10 and 12 ms, forward 4 and 6 ms. */
typedef struct {
    ss_rank_step ranks[2];
    int64_t phase_ns[2][1];
    ss_phase_stat phase;
    double vec[2][2];
    ss_values_item values[2];
    ss_step_view v;
} step_fx;

static void fx_build(step_fx *fx, uint64_t step)
{
    memset(fx, 0, sizeof *fx);
    for (uint32_t r = 0; r < 2; r++) {
        fx->phase_ns[r][0] = (4 + 2 * (int64_t)r) * MS;
        fx->ranks[r] = (ss_rank_step){.present = 1,
                                      .step_ns = (10 + 2 * (int64_t)r) * MS,
                                      .rss_bytes = 500, .device_bytes =
                                          SS_MISSING,
                                      .phase_ns = fx->phase_ns[r],
                                      .begin_ns = SS_MISSING};
        /* the vector "grad/norm": {step, -inf} on rank 0, {r, step} on 1 */
        fx->vec[r][0] = r ? (double)r : (double)step;
        fx->vec[r][1] = r ? (double)step : -INFINITY;
        fx->values[r] = (ss_values_item){.name = 1, .n = 2,
                                         .v = fx->vec[r]};
        fx->ranks[r].n_values = 1;
        fx->ranks[r].values = &fx->values[r];
    }
    fx->phase = (ss_phase_stat){0, {4 * MS, 4 * MS, 6 * MS, 6 * MS, 1, 2}};
    fx->v = (ss_step_view){
        .step = step, .world_size = 2, .n_present = 2,
        .step_time = {10 * MS, 10 * MS, 12 * MS, 12 * MS, 1, 2},
        .rss = {500, 500, 500, 500, 0, 2},
        .device = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                   SS_NO_RANK, 0},
        .n_phases = 1, .phases = &fx->phase, .n_names = 1,
        .ranks = fx->ranks};
}

static ss_finding finding_(void)
{
    ss_finding f;
    memset(&f, 0, sizeof f);
    f.id = 1;
    snprintf(f.kind, sizeof f.kind, "straggler");
    f.severity = SS_CRITICAL;
    f.n_ranks = 1;
    f.ranks[0] = 1;
    snprintf(f.phase, sizeof f.phase, "forward");
    f.first_step = 1;
    f.last_step = 2;
    snprintf(f.evidence_json, sizeof f.evidence_json, "{\"late_ms\":2}");
    snprintf(f.message, sizeof f.message, "rank 1 is slow");
    return f;
}

/* A store with run 1: 2 ranks, steps 1 and 2, one finding, one event. */
static const char *fixture(void)
{
    static char path[600];
    if (path[0])
        return path;
    testing_tmp_path("fx.db", path, sizeof path);
    char err[512] = "";
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    ss_store *s = ss_store_open(path, &cfg, 1, err, sizeof err);
    if (!s) {
        fprintf(stderr, "  ss_store_open: %s\n", err);
        return path;
    }
    ss_run_info info = {.world_size = 2, .started_at = 1700000000000000000};
    snprintf(info.uuid, sizeof info.uuid, "run-uuid");
    snprintf(info.name, sizeof info.name, "train");
    int64_t id;
    ss_store_begin_run(s, &info, &id, err, sizeof err);
    ss_store_put_attempt(s, id, 0, info.started_at);
    for (uint64_t step = 1; step <= 2; step++) {
        step_fx fx;
        fx_build(&fx, step);
        ss_store_put_step(s, id, &fx.v, names_);
    }
    ss_finding f = finding_();
    ss_store_put_finding(s, id, &f);
    ss_store_put_event(s, id, 0, info.started_at, "run_started", -1, "go");
    ss_store_close(s);
    return path;
}

static ss_http *start_(const char *host, const char *token, ss_live *live)
{
    char err[512] = "";
    ss_http_config cfg = {host, 0, 0, fixture(), live, token, NULL, NULL,
                          NULL, NULL, NULL, NULL};
    ss_http *h = ss_http_start(&cfg, err, sizeof err);
    if (!h)
        fprintf(stderr, "  ss_http_start: %s\n", err);
    return h;
}

/* ---- a tiny client ---- */

static int connect_(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

typedef struct {
    int status;
    char head[2048];
    char *body; /* malloc'd, NUL-terminated */
} response;

/* Sends RAW (a whole request) and reads the response until the server
 * closes.  Returns 0 or -1. */
static int exchange(uint16_t port, const char *raw, response *r)
{
    memset(r, 0, sizeof *r);
    int fd = connect_(port);
    if (fd < 0)
        return -1;
    if (write(fd, raw, strlen(raw)) != (ssize_t)strlen(raw)) {
        close(fd);
        return -1;
    }
    ss_buf b = {0};
    char chunk[8192];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0)
        ss_buf_add(&b, chunk, (size_t)n);
    close(fd);
    if (!b.data)
        return -1;
    char *sep = strstr(b.data, "\r\n\r\n");
    if (!sep || sscanf(b.data, "HTTP/1.%*d %d", &r->status) != 1) {
        ss_buf_free(&b);
        return -1;
    }
    snprintf(r->head, sizeof r->head, "%.*s", (int)(sep - b.data), b.data);
    r->body = strdup(sep + 4);
    ss_buf_free(&b);
    return r->body ? 0 : -1;
}

static int get(uint16_t port, const char *path, const char *headers,
               response *r)
{
    char raw[4096];
    snprintf(raw, sizeof raw, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%s\r\n", path,
             headers ? headers : "");
    return exchange(port, raw, r);
}

/* ---- tests ---- */

static void endpoints_answer_json(void)
{
    ss_http *h = start_(NULL, NULL, NULL);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    CHECK(port != 0);
    char want_url[64];
    snprintf(want_url, sizeof want_url, "http://127.0.0.1:%u/", port);
    CHECK_STR(ss_http_url(h), want_url);
    static const struct {
        const char *path, *starts;
    } cases[] = {
        {"/api/runs", "{\"runs\":[{\"id\":1,\"uuid\":\"run-uuid\""},
        {"/api/runs/", "{\"runs\":[{\"id\":1,"},
        {"/api/runs/1", "{\"run\":{\"id\":1,"},
        {"/api/runs/1/steps", "{\"steps\":[{\"step\":1,\"n_present\":2,"},
        {"/api/runs/1/steps?from=2&limit=5", "{\"steps\":[{\"step\":2,"},
        {"/api/runs/%31/steps?from=%32", "{\"steps\":[{\"step\":2,"},
        {"/api/runs/1/steps?attempt=0&to=1", "{\"steps\":[{\"step\":1,"},
        {"/api/runs/1/heatmap", "{\"ranks\":[0,1],\"steps\":[1,2],"
                                "\"step_ms\":[[10.000,10.000],[12.000,"
                                "12.000]],\"late_ms\":"},
        {"/api/runs/1/host?limit=1", "{\"ranks\":[0,1],\"steps\":[2],"
                                     "\"runq_ms\":[[null],[null]],"},
        {"/api/runs/1/ranks", "{\"ranks\":[{\"rank\":0,"},
        {"/api/runs/1/findings", "{\"findings\":[{\"id\":1,\"kind\":"
                                 "\"straggler\""},
        {"/api/runs/1/events?after=0", "{\"events\":[{\"id\":1,"},
        {"/api/runs/1/goodput", "{\"goodput\":{\"run\": 1, \"running\": "},
        {"/api/runs/1/events?after=1&limit=10", "{\"events\":[]}"},
        {"/api/runs/1/values", "{\"attempt\":0,\"dropped_vectors\":0,"
                               "\"values\":[{\"name\":\"grad/norm\","
                               "\"ranks\":[0,1],\"first_step\":1,"
                               "\"last_step\":2,"},
        {"/api/runs/1/values/grad/norm?rank=0&from=2",
         "{\"name\":\"grad/norm\",\"attempt\":0,\"rank\":0,\"cells\":2,"
         "\"more\":false,\"next_from\":null,\"steps\":[{\"step\":2,"
         "\"truncated\":0,\"values\":[2,\"-inf\"]}]}"},
        {"/api/runs/1/values/grad%2Fnorm?index=1&limit=2",
         "{\"name\":\"grad/norm\",\"attempt\":0,\"index\":1,\"cells\":2,"
         "\"more\":true,\"next_from\":2,\"steps\":[{\"step\":1,"
         "\"ranks\":[0,1],\"values\":[\"-inf\",1]}]}"},
        {"/api/runs/1/values/none?index=0", "{\"name\":\"none\","},
        /* two steps: too few to judge, the history is there all the same */
        {"/api/runs/1/history", "{\"name\":\"train\",\"run_id\":1,"
                                "\"verdict\":\"cannot_judge\","},
        {"/api/history?name=train&last=5&metric=step_time",
         "{\"name\":\"train\",\"run_id\":1,"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        response r;
        REQUIRE(get(port, cases[i].path, NULL, &r) == 0);
        if (r.status != 200 ||
            strncmp(r.body, cases[i].starts, strlen(cases[i].starts)) != 0)
            fprintf(stderr, "  GET %s: %d %s\n", cases[i].path, r.status,
                    r.body);
        CHECK_EQ_INT(r.status, 200);
        CHECK(strncmp(r.body, cases[i].starts, strlen(cases[i].starts)) == 0);
        CHECK(strstr(r.head, "Content-Type: application/json") != NULL);
        free(r.body);
    }
    response r;
    REQUIRE(get(port, "/metrics", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.head, "text/plain; version=0.0.4") != NULL);
    CHECK(strstr(r.body, "stepscope_info{mode=\"serve\"} 1\n") != NULL);
    free(r.body);
    REQUIRE(get(port, "/api/live", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 404);
    free(r.body);
    ss_http_stop(h);
}

static void bad_requests_get_4xx_json(void)
{
    ss_http *h = start_(NULL, NULL, NULL);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    static const struct {
        const char *path;
        int status;
    } cases[] = {
        {"/api/runs/abc", 400},
        {"/api/runs/0", 400},
        {"/api/runs/-1", 400},
        {"/api/runs/99999999999999999999", 400},
        {"/api/runs/2", 404},
        {"/api/runs/2/steps", 404},
        {"/api/runs/1/nope", 404},
        {"/api/runs/1/steps/x", 404},
        {"/api/runs/1/steps?limit=abc", 400},
        {"/api/runs/1/steps?limit=0", 400},
        {"/api/runs/1/steps?limit=10001", 400},
        {"/api/runs/1/steps?from=-3", 400},
        {"/api/runs/1/steps?from=5&to=2", 400},
        {"/api/runs/1/heatmap?to=1x", 400},
        {"/api/runs/1/events?after=x", 400},
        /* strict numbers: nothing but digits, in range */
        {"/api/runs/1/steps?limit=%2010", 400},
        {"/api/runs/1/steps?limit=10%20", 400},
        {"/api/runs/1/steps?limit=10%00", 400},
        {"/api/runs/1/steps?limit=%2B10", 400},
        {"/api/runs/1/steps?limit=+10", 400},
        {"/api/runs/1/steps?limit=", 400},
        {"/api/runs/1/steps?limit", 400},
        {"/api/runs/1/steps?limit=10abc", 400},
        {"/api/runs/1/steps?from=99999999999999999999", 400},
        {"/api/runs/1/heatmap?attempt=0x1", 400},
        {"/api/runs/1/events?after=1e3", 400},
        {"/api/runs/+1", 400},
        {"/api/runs/%201", 400},
        {"/api/runs/1%00", 400},
        {"/api/runs/1%00/steps", 400},
        {"/api/runs/1?attempt=3", 404},
        {"/api/runs/1/stream", 404}, /* not live here */
        {"/api/runs/1/values/grad/norm", 400},      /* no rank, no index */
        {"/api/runs/1/values/grad/norm?rank=0&index=0", 400},
        {"/api/runs/1/values/grad/norm?rank=x", 400},
        {"/api/runs/1/values/grad/norm?limit=0&rank=0", 400},
        {"/api/runs/1/values/grad/norm?from=3&to=1&rank=0", 400},
        {"/api/runs/1/values/grad/norm?limit=1048577&index=0", 400},
        {"/api/runs/2/values", 404},
        {"/api/runs/2/history", 404},
        {"/api/history", 400},
        {"/api/history?name=", 400},
        {"/api/history?name=train%00", 400},
        {"/api/history?name=nope", 404},
        {"/api/history?last=0&name=train", 400},
        {"/api/history?last=1001&name=train", 400},
        {"/api/history?last=5x&name=train", 400},
        {"/api/history?metric=&name=train", 400},
        {"/api/runs/1/history?last=-1", 400},
        {"/api/nothing", 404},
        {"/api", 404},
        {"/nothing", 404},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        response r;
        REQUIRE(get(port, cases[i].path, NULL, &r) == 0);
        if (r.status != cases[i].status)
            fprintf(stderr, "  GET %s: %d %s\n", cases[i].path, r.status,
                    r.body);
        CHECK_EQ_INT(r.status, cases[i].status);
        CHECK(strncmp(r.body, "{\"error\":\"", 10) == 0);
        const char *arg = strchr(cases[i].path, '?');
        if (arg && r.status == 400) { /* the error names the argument */
            char name[32];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(arg + 1, "="),
                     arg + 1);
            CHECK(strstr(r.body, name) != NULL);
        }
        free(r.body);
    }
    response r;
    REQUIRE(exchange(port, "POST /api/runs HTTP/1.0\r\nContent-Length: 2"
                           "\r\n\r\n{}", &r) == 0);
    CHECK_EQ_INT(r.status, 405);
    CHECK(strstr(r.head, "Allow: GET, HEAD") != NULL);
    CHECK(strncmp(r.body, "{\"error\":", 9) == 0);
    free(r.body);
    REQUIRE(exchange(port, "DELETE /api/runs/1 HTTP/1.0\r\n\r\n", &r) == 0);
    CHECK_EQ_INT(r.status, 405);
    free(r.body);
    char longpath[1200] = "/api/runs/";
    memset(longpath + 10, 'a', 1000);
    REQUIRE(get(port, longpath, NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 414);
    free(r.body);
    /* malformed requests are libmicrohttpd's to refuse; the server lives */
    if (exchange(port, "GARBAGE\r\n\r\n", &r) == 0) {
        CHECK(r.status >= 400 && r.status < 500);
        free(r.body);
    }
    REQUIRE(exchange(port, "HEAD /api/runs HTTP/1.0\r\n\r\n", &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(r.body, "");
    free(r.body);
    REQUIRE(get(port, "/api/runs", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    ss_http_stop(h);
}

static void authorization_decision(void)
{
    CHECK(ss_http_authorized(NULL, NULL, NULL));
    CHECK(ss_http_authorized(NULL, "Bearer x", "y"));
    CHECK(!ss_http_authorized("s3cret", NULL, NULL));
    CHECK(ss_http_authorized("s3cret", "Bearer s3cret", NULL));
    CHECK(ss_http_authorized("s3cret", "bearer s3cret", NULL));
    CHECK(ss_http_authorized("s3cret", NULL, "s3cret"));
    CHECK(ss_http_authorized("s3cret", "Bearer wrong", "s3cret"));
    CHECK(!ss_http_authorized("s3cret", "Bearer s3cre", NULL));
    CHECK(!ss_http_authorized("s3cret", "Bearer s3crett", NULL));
    CHECK(!ss_http_authorized("s3cret", "Basic s3cret", NULL));
    CHECK(!ss_http_authorized("s3cret", "s3cret", NULL));
    CHECK(!ss_http_authorized("s3cret", NULL, ""));
    CHECK(!ss_http_authorized("s3cret", "Bearer ", NULL));
}

static int post(uint16_t port, const char *path, const char *headers,
                response *r)
{
    char raw[4096];
    snprintf(raw, sizeof raw, "POST %s HTTP/1.0\r\nHost: 127.0.0.1\r\n"
             "Content-Length: 0\r\n%s\r\n", path, headers ? headers : "");
    return exchange(port, raw, r);
}

/* ---- Host and Origin ---- */

static void host_and_origin_decision(void)
{
    CHECK(ss_http_host_allowed("127.0.0.1", NULL));
    CHECK(ss_http_host_allowed("127.0.0.1", "127.0.0.1:8470"));
    CHECK(ss_http_host_allowed("127.0.0.1", "127.0.0.1"));
    CHECK(ss_http_host_allowed("127.0.0.1", "LocalHost:1"));
    CHECK(ss_http_host_allowed("127.0.0.1", "[::1]:8470"));
    CHECK(ss_http_host_allowed("127.0.0.5", "127.0.0.5:9"));
    CHECK(ss_http_host_allowed("::1", "[::1]:9"));
    CHECK(!ss_http_host_allowed("127.0.0.1", "127.0.0.5:9"));
    CHECK(!ss_http_host_allowed("127.0.0.1", "evil.example:8470"));
    CHECK(!ss_http_host_allowed("127.0.0.1", "localhost.evil.example"));
    CHECK(!ss_http_host_allowed("127.0.0.1", "localhost:"));
    CHECK(!ss_http_host_allowed("127.0.0.1", "localhost:99999"));
    CHECK(!ss_http_host_allowed("127.0.0.1", "localhost:80x"));
    CHECK(!ss_http_host_allowed("127.0.0.1", "localhost@evil"));
    CHECK(!ss_http_host_allowed("::1", "::1:80"));
    CHECK(!ss_http_host_allowed("::1", "[::1"));
    CHECK(!ss_http_host_allowed("127.0.0.1", ""));
    CHECK(ss_http_origin_allowed(NULL, NULL));
    CHECK(ss_http_origin_allowed(NULL, "evil.example"));
    CHECK(ss_http_origin_allowed("http://127.0.0.1:8470", "127.0.0.1:8470"));
    CHECK(ss_http_origin_allowed("HTTP://LOCALHOST:1", "localhost:1"));
    CHECK(!ss_http_origin_allowed("http://evil.example", "127.0.0.1:8470"));
    CHECK(!ss_http_origin_allowed("http://127.0.0.1:8471", "127.0.0.1:8470"));
    CHECK(ss_http_origin_allowed("https://node1.example",
                                 "node1.example"));
    CHECK(!ss_http_origin_allowed("ftp://127.0.0.1:8470", "127.0.0.1:8470"));
    CHECK(!ss_http_origin_allowed("http://127.0.0.1:8470/x",
                                  "127.0.0.1:8470"));
    CHECK(!ss_http_origin_allowed("null", "127.0.0.1:8470"));
    CHECK(!ss_http_origin_allowed("http://127.0.0.1:8470", NULL));
}

/* Sends METHOD PATH with exactly the headers HEADERS (Host included). */
static int request_raw(uint16_t port, const char *method, const char *path,
                       const char *headers, response *r)
{
    char raw[4096];
    snprintf(raw, sizeof raw, "%s %s HTTP/1.0\r\n%s%s\r\n", method, path,
             headers, strcmp(method, "POST") == 0 ? "Content-Length: 0\r\n"
                                                  : "");
    return exchange(port, raw, r);
}

static int status_of(uint16_t port, const char *method, const char *path,
                     const char *headers)
{
    response r;
    if (request_raw(port, method, path, headers, &r) != 0)
        return -1;
    free(r.body);
    return r.status;
}

/* A loopback server answers only requests for its own name (DNS rebinding
 * points another name at 127.0.0.1), static files as much as the API; a
 * page of another origin is refused on any address; off loopback the
 * token rules stay as they were. */
static void foreign_host_and_origin_refused(void)
{
    ss_http *h = start_("127.0.0.1", NULL, NULL);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    char own[128], origin[256];
    snprintf(own, sizeof own, "Host: 127.0.0.1:%u\r\n", port);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs", own), 200);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs",
                           "Host: localhost:1234\r\n"), 200);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs", "Host: [::1]\r\n"),
                 200);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs", ""), 200); /* 1.0 */
    response r;
    REQUIRE(request_raw(port, "GET", "/api/runs",
                        "Host: rebind.evil.example:8470\r\n", &r) == 0);
    CHECK_EQ_INT(r.status, 403);
    CHECK(strstr(r.body, "{\"error\":\"Host 'rebind.evil.example:8470' is "
                         "not this server's") != NULL);
    free(r.body);
    CHECK_EQ_INT(status_of(port, "GET", "/", "Host: evil.example\r\n"), 403);
    CHECK_EQ_INT(status_of(port, "GET", "/metrics",
                           "Host: evil.example\r\n"), 403);
    /* a page of this server may read it; one of another site may not */
    snprintf(origin, sizeof origin, "%sOrigin: http://127.0.0.1:%u\r\n",
             own, port);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs", origin), 200);
    snprintf(origin, sizeof origin, "%sOrigin: http://evil.example\r\n",
             own);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs", origin), 403);
    snprintf(origin, sizeof origin, "%sOrigin: null\r\n", own);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs", origin), 403);
    ss_http_stop(h);

    /* beyond loopback: any name, with the token; still no foreign page */
    h = start_("0.0.0.0", "abc123", NULL);
    REQUIRE(h);
    port = ss_http_port(h);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs?token=abc123",
                           "Host: node7.cluster.example:1\r\n"), 200);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs",
                           "Host: node7.cluster.example:1\r\n"), 401);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs?token=abc123",
                           "Host: node7:1\r\nOrigin: http://evil.example\r\n"),
                 403);
    ss_http_stop(h);
}

/* The server on the fixture with live state L and stacks hook STACKS. */
static ss_http *start_with_stacks(ss_live *l, ss_http_stacks_fn stacks)
{
    char err[512] = "";
    ss_http_config cfg = {"127.0.0.1", 0, 0, fixture(), l, NULL,
                          stacks, NULL, NULL, NULL, NULL, NULL};
    ss_http *h = ss_http_start(&cfg, err, sizeof err);
    if (!h)
        fprintf(stderr, "  ss_http_start: %s\n", err);
    return h;
}

static int stacks_calls;

static unsigned fake_stacks(void *ctx, int flags, ss_buf *out)
{
    (void)ctx;
    stacks_calls++;
    ss_buf_printf(out, "{\"native\":%d,\"brief\":%d}",
                  (flags & SS_HTTP_STACKS_NATIVE) != 0,
                  (flags & SS_HTTP_STACKS_BRIEF) != 0);
    return 200;
}

/* Stacks are taken by POST only: a GET or HEAD (which any page can make a
 * browser send) never reaches the hook. */
static void stacks_by_post_only(void)
{
    ss_live *l = ss_live_create(1, 2);
    REQUIRE(l);
    ss_http *h = start_with_stacks(l, fake_stacks);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    stacks_calls = 0;
    response r;
    REQUIRE(get(port, "/api/runs/1/stacks?native=1", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 405);
    CHECK(strstr(r.body, "taken by POST /api/runs/1/stacks") != NULL);
    free(r.body);
    CHECK_EQ_INT(status_of(port, "HEAD", "/api/runs/1/stacks",
                           "Host: 127.0.0.1\r\n"), 405);
    CHECK_EQ_INT(status_of(port, "GET", "/api/runs/1/stacks?native=1",
                           "Host: evil.example\r\n"), 403);
    CHECK_EQ_INT(stacks_calls, 0);
    /* a page's POST, even of this server, is refused too */
    CHECK_EQ_INT(status_of(port, "POST", "/api/runs/1/stacks",
                           "Host: 127.0.0.1\r\n"
                           "Origin: http://127.0.0.1\r\n"), 403);
    CHECK_EQ_INT(stacks_calls, 0);
    REQUIRE(post(port, "/api/runs/1/stacks?native=1", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.body, "{\"native\":1,\"brief\":0}") != NULL);
    free(r.body);
    CHECK_EQ_INT(stacks_calls, 1);
    /* ranks=0: the document without the ranks' objects */
    REQUIRE(post(port, "/api/runs/1/stacks?ranks=0", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.body, "{\"native\":0,\"brief\":1}") != NULL);
    free(r.body);
    REQUIRE(post(port, "/api/runs/1/stacks?ranks=all", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    free(r.body);
    CHECK_EQ_INT(stacks_calls, 2);
    REQUIRE(post(port, "/api/runs/2/stacks", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 404); /* not the live run */
    free(r.body);
    CHECK_EQ_INT(stacks_calls, 2);
    ss_http_stop(h);
    ss_live_destroy(l);
}

/* ---- a rank's recent steps ---- */

static char recent_asked[64];

static unsigned fake_recent(void *ctx, uint32_t rank, uint32_t steps,
                            ss_buf *out)
{
    snprintf(recent_asked, sizeof recent_asked, "%s %u %u", (char *)ctx,
             rank, steps);
    if (rank == 9) {
        ss_buf_puts(out, "node 4 was lost");
        return 503;
    }
    ss_buf_printf(out, "{\"node\":0,\"rank\":%u,\"kept\":0}", rank);
    return 200;
}

/* GET /recent asks the hook for the live run only, with the rank and the
 * steps checked; the hook's refusal is passed on with its status. */
static void recent_of_a_live_rank(void)
{
    ss_live *l = ss_live_create(1, 2);
    REQUIRE(l);
    char err[512] = "";
    ss_http_config cfg = {"127.0.0.1", 0, 0, fixture(), l, NULL, NULL, NULL,
                          NULL, NULL, fake_recent, "ctx"};
    ss_http *h = ss_http_start(&cfg, err, sizeof err);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    response r;
    REQUIRE(get(port, "/api/runs/1/recent?rank=3", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.body, "{\"node\":0,\"rank\":3,\"kept\":0}") != NULL);
    CHECK_STR(recent_asked, "ctx 3 64");
    free(r.body);
    REQUIRE(get(port, "/api/runs/1/recent?rank=2&steps=1024", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(recent_asked, "ctx 2 1024");
    free(r.body);
    recent_asked[0] = '\0';
    const char *bad[] = {"/api/runs/1/recent", "/api/runs/1/recent?rank=-1",
                         "/api/runs/1/recent?rank=1&steps=0",
                         "/api/runs/1/recent?rank=1&steps=1025",
                         "/api/runs/1/recent?rank=x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        REQUIRE(get(port, bad[i], NULL, &r) == 0);
        CHECK_EQ_INT(r.status, 400);
        free(r.body);
    }
    CHECK_STR(recent_asked, "");
    REQUIRE(get(port, "/api/runs/1/recent?rank=9", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 503);
    CHECK(strstr(r.body, "node 4 was lost") != NULL);
    free(r.body);
    REQUIRE(get(port, "/api/runs/2/recent?rank=1", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 404); /* not the live run */
    CHECK(strstr(r.body, "is not live here") != NULL);
    free(r.body);
    CHECK_EQ_INT(status_of(port, "POST", "/api/runs/1/recent?rank=1",
                           "Host: 127.0.0.1\r\n"), 405);
    ss_http_stop(h);
    ss_live_destroy(l);
}

/* ---- the profile endpoint ---- */

static int profile_calls;
static char profile_args[256];

static unsigned fake_profile(void *ctx, int start, const char *ranks,
                             const char *seconds, const char *request,
                             ss_buf *out)
{
    profile_calls++;
    snprintf(profile_args, sizeof profile_args, "%s %d %s %s %s",
             (const char *)ctx, start, ranks ? ranks : "-",
             seconds ? seconds : "-", request ? request : "-");
    if (ranks && strcmp(ranks, "99") == 0) {
        ss_buf_puts(out, "rank 99 is out of range");
        return 400;
    }
    ss_buf_puts(out, "{\"request\":1}");
    return start ? 202 : 200;
}

/* POST /api/runs/{id}/profile reaches the hook only with the token off
 * loopback, for the live run only; POST anywhere else is refused. */
static void profile_endpoint(void)
{
    ss_live *l = ss_live_create(1, 2);
    REQUIRE(l);
    char err[512] = "";
    ss_http_config cfg = {"0.0.0.0", 0, 0, fixture(), l, "abc123",
                          NULL, NULL, fake_profile, "ctx", NULL, NULL};
    ss_http *h = ss_http_start(&cfg, err, sizeof err);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    response r;
    profile_calls = 0;
    REQUIRE(post(port, "/api/runs/1/profile?ranks=0,1&seconds=2", NULL,
                 &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    free(r.body);
    REQUIRE(post(port, "/api/runs/1/profile?ranks=0,1&seconds=2",
                 "Authorization: Bearer wrong\r\n", &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    free(r.body);
    CHECK_EQ_INT(profile_calls, 0);
    REQUIRE(post(port, "/api/runs/1/profile?ranks=0,1&seconds=2",
                 "Authorization: Bearer abc123\r\n", &r) == 0);
    CHECK_EQ_INT(r.status, 202);
    CHECK(strstr(r.body, "\"request\":1") != NULL);
    free(r.body);
    CHECK_STR(profile_args, "ctx 1 0,1 2 -");
    REQUIRE(get(port, "/api/runs/1/profile?request=1&token=abc123", NULL,
                &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    CHECK_STR(profile_args, "ctx 0 - - 1");
    /* the hook's refusal is wrapped as an error document */
    REQUIRE(post(port, "/api/runs/1/profile?ranks=99&seconds=2&token=abc123",
                 NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 400);
    CHECK(strstr(r.body, "{\"error\":\"rank 99 is out of range") != NULL);
    free(r.body);
    /* not the live run; POST elsewhere; HEAD */
    int calls = profile_calls;
    REQUIRE(post(port, "/api/runs/2/profile?ranks=0&seconds=2&token=abc123",
                 NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 404);
    free(r.body);
    REQUIRE(post(port, "/api/runs/1/steps?token=abc123", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 405);
    free(r.body);
    REQUIRE(post(port, "/metrics?token=abc123", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 405);
    free(r.body);
    REQUIRE(post(port, "/", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 405);
    free(r.body);
    CHECK_EQ_INT(profile_calls, calls);
    /* a cross-site POST from a browser, even with the token */
    REQUIRE(post(port, "/api/runs/1/profile?ranks=0&seconds=2&token=abc123",
                 "Origin: http://evil.example\r\n", &r) == 0);
    CHECK_EQ_INT(r.status, 403);
    free(r.body);
    CHECK_EQ_INT(profile_calls, calls);
    ss_http_stop(h);
    ss_live_destroy(l);
}

static void token_required_beyond_loopback(void)
{
    char err[256] = "";
    ss_http_config cfg = {"0.0.0.0", 0, 0, fixture(), NULL, NULL, NULL, NULL,
                          NULL, NULL, NULL, NULL};
    CHECK(ss_http_start(&cfg, err, sizeof err) == NULL);
    CHECK(strstr(err, "token") != NULL);

    ss_http *h = start_("0.0.0.0", "abc123", NULL);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    response r;
    REQUIRE(get(port, "/api/runs", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    CHECK(strncmp(r.body, "{\"error\":", 9) == 0);
    CHECK(strstr(r.head, "WWW-Authenticate: Bearer") != NULL);
    free(r.body);
    REQUIRE(get(port, "/metrics", "Authorization: Bearer nope\r\n", &r) == 0);
    CHECK_EQ_INT(r.status, 401);
    free(r.body);
    REQUIRE(get(port, "/api/runs", "Authorization: Bearer abc123\r\n", &r) ==
            0);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    REQUIRE(get(port, "/api/runs/1/steps?token=abc123&limit=1", NULL, &r) ==
            0);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    REQUIRE(get(port, "/metrics?token=abc123", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    /* the page itself carries no data */
    REQUIRE(get(port, "/", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    ss_http_stop(h);

    /* on loopback no token is asked even when one is configured */
    h = start_("127.0.0.1", "abc123", NULL);
    REQUIRE(h);
    REQUIRE(get(ss_http_port(h), "/api/runs", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    ss_http_stop(h);
}

static void addresses(void)
{
    char host[64], err[256];
    uint16_t port;
    CHECK_EQ_INT(ss_http_parse_addr("127.0.0.1:9000", host, sizeof host,
                                    &port, err, sizeof err), 0);
    CHECK_STR(host, "127.0.0.1");
    CHECK_EQ_INT(port, 9000);
    CHECK_EQ_INT(ss_http_parse_addr("0.0.0.0", host, sizeof host, &port, err,
                                    sizeof err), 0);
    CHECK_STR(host, "0.0.0.0");
    CHECK_EQ_INT(port, SS_HTTP_DEFAULT_PORT);
    CHECK_EQ_INT(ss_http_parse_addr(":0", host, sizeof host, &port, err,
                                    sizeof err), 0);
    CHECK_STR(host, "127.0.0.1");
    CHECK_EQ_INT(port, 0);
    CHECK_EQ_INT(ss_http_parse_addr("8080", host, sizeof host, &port, err,
                                    sizeof err), 0);
    CHECK_EQ_INT(port, 8080);
    CHECK_EQ_INT(ss_http_parse_addr("[::1]:81", host, sizeof host, &port, err,
                                    sizeof err), 0);
    CHECK_STR(host, "::1");
    CHECK_EQ_INT(port, 81);
    CHECK_EQ_INT(ss_http_parse_addr("::", host, sizeof host, &port, err,
                                    sizeof err), 0);
    CHECK_STR(host, "::");
    CHECK_EQ_INT(ss_http_parse_addr("localhost:5", host, sizeof host, &port,
                                    err, sizeof err), 0);
    CHECK_STR(host, "127.0.0.1");
    CHECK_EQ_INT(ss_http_parse_addr("example.com:80", host, sizeof host,
                                    &port, err, sizeof err), -1);
    CHECK_EQ_INT(ss_http_parse_addr("127.0.0.1:70000", host, sizeof host,
                                    &port, err, sizeof err), -1);
    CHECK_EQ_INT(ss_http_parse_addr("127.0.0.1:x", host, sizeof host, &port,
                                    err, sizeof err), -1);
    CHECK_EQ_INT(ss_http_parse_addr("[::1", host, sizeof host, &port, err,
                                    sizeof err), -1);
    CHECK_EQ_INT(ss_http_parse_addr("", host, sizeof host, &port, err,
                                    sizeof err), -1);
    CHECK(ss_http_is_loopback("127.0.0.1"));
    CHECK(ss_http_is_loopback("127.1.2.3"));
    CHECK(ss_http_is_loopback("::1"));
    CHECK(ss_http_is_loopback("::ffff:127.0.0.1"));
    CHECK(!ss_http_is_loopback("0.0.0.0"));
    CHECK(!ss_http_is_loopback("::"));
    CHECK(!ss_http_is_loopback("10.0.0.1"));
    CHECK(!ss_http_is_loopback("nonsense"));
}

static void busy_port(void)
{
    /* Hold a port, then ask for it. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            listen(fd, 1) == 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    uint16_t held = ntohs(a.sin_port);
    char err[256] = "";
    ss_http_config cfg = {"127.0.0.1", held, 0, fixture(), NULL, NULL, NULL,
                          NULL, NULL, NULL, NULL, NULL};
    CHECK(ss_http_start(&cfg, err, sizeof err) == NULL);
    CHECK(strstr(err, "in use") != NULL);
    cfg.fallback = 1;
    ss_http *h = ss_http_start(&cfg, err, sizeof err);
    REQUIRE(h);
    CHECK(ss_http_fell_back(h));
    CHECK(ss_http_port(h) != held && ss_http_port(h) != 0);
    ss_http_stop(h);
    close(fd);
    ss_http_stop(NULL);
}

static const unsigned char page_[] = "<html>dashboard</html>";
static const unsigned char js_[] = "console.log(1)";

static void static_files(void)
{
    ss_static_file files[] = {
        {"/", "text/html; charset=utf-8", page_, sizeof page_ - 1},
        {"/app.js", "text/javascript", js_, sizeof js_ - 1},
    };
    ss_http_set_static(files, 2);
    ss_http *h = start_(NULL, NULL, NULL);
    ss_http_set_static(NULL, 0);
    REQUIRE(h);
    response r;
    REQUIRE(get(ss_http_port(h), "/", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(r.body, "<html>dashboard</html>");
    free(r.body);
    REQUIRE(get(ss_http_port(h), "/app.js", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.head, "Content-Type: text/javascript") != NULL);
    CHECK_STR(r.body, "console.log(1)");
    free(r.body);
    REQUIRE(get(ss_http_port(h), "/other.js", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 404);
    free(r.body);
    ss_http_stop(h);

    h = start_(NULL, NULL, NULL); /* none registered: the default page */
    REQUIRE(h);
    REQUIRE(get(ss_http_port(h), "/", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.body, "api/runs") != NULL);
    free(r.body);
    ss_http_stop(h);
}

static void live_endpoints(void)
{
    ss_live *l = ss_live_create(1, 2);
    REQUIRE(l);
    ss_http *h = start_(NULL, NULL, l);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    ss_live_rank_hello(l, 0, "node1", 11);
    ss_live_rank_status(l, 0, 3, "forward", 0);
    step_fx fx;
    fx_build(&fx, 3);
    ss_live_step(l, &fx.v, names_);
    ss_finding f = finding_();
    ss_live_finding(l, &f);
    response r;
    REQUIRE(get(port, "/api/live", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    char want[128];
    snprintf(want, sizeof want, "{\"run_id\":1,\"world_size\":2,\"attempt\""
             ":0,\"running\":true,\"pid\":%ld}\n", (long)getpid());
    CHECK_STR(r.body, want);
    free(r.body);
    REQUIRE(get(port, "/api/runs/1/ranks", NULL, &r) == 0);
    CHECK(strstr(r.body, "\"phase\":\"forward\"") != NULL);
    free(r.body);
    REQUIRE(get(port, "/metrics", NULL, &r) == 0);
    CHECK(strstr(r.body, "stepscope_info{mode=\"run\"} 1\n") != NULL);
    CHECK(strstr(r.body, "stepscope_steps_finalized_total{run=\"1\"} 1\n"));
    CHECK(strstr(r.body, "stepscope_step_seconds{run=\"1\",stat=\"max\"} "
                         "0.012000000\n"));
    CHECK(strstr(r.body, "stepscope_phase_seconds{run=\"1\",phase=\"forward\""
                         ",stat=\"median\"} 0.004000000\n"));
    CHECK(strstr(r.body, "stepscope_rank_step_seconds{run=\"1\",rank=\"1\"} "
                         "0.012000000\n"));
    CHECK(strstr(r.body, "stepscope_rank_up{run=\"1\",rank=\"0\"} 1\n"));
    CHECK(strstr(r.body, "stepscope_rank_up{run=\"1\",rank=\"1\"} 0\n"));
    CHECK(strstr(r.body, "stepscope_findings{run=\"1\",kind=\"straggler\","
                         "severity=\"critical\"} 1\n"));
    /* The live run's goodput, from the store. */
    CHECK(strstr(r.body, "# TYPE stepscope_goodput_ratio gauge\n"
                         "stepscope_goodput_ratio{run=\"1\"} "));
    CHECK(strstr(r.body, "stepscope_goodput_seconds{run=\"1\","
                         "category=\"lost_work\"} 0.000\n"));
    free(r.body);
    REQUIRE(get(port, "/api/runs/2/stream", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 404);
    free(r.body);
    REQUIRE(exchange(port, "HEAD /api/runs/1/stream HTTP/1.0\r\n\r\n", &r) ==
            0);
    CHECK_EQ_INT(r.status, 405);
    free(r.body);
    ss_live_attempt(l, 1); /* a restart: the attempt shows, ranks start */
    REQUIRE(get(port, "/api/live", NULL, &r) == 0);
    CHECK(strstr(r.body, "\"attempt\":1,") != NULL);
    free(r.body);
    REQUIRE(get(port, "/metrics", NULL, &r) == 0);
    CHECK(strstr(r.body, "stepscope_attempt{run=\"1\"} 1\n") != NULL);
    free(r.body);
    ss_http_stop(h);
    ss_live_destroy(l);
}

/* Reads from FD until NEEDLE has arrived (or 5 s pass); returns the text. */
static int read_until(int fd, ss_buf *b, const char *needle)
{
    char chunk[4096];
    while (!b->data || !strstr(b->data, needle)) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n <= 0)
            return -1;
        ss_buf_add(b, chunk, (size_t)n);
    }
    return 0;
}

static void event_stream(void)
{
    ss_live *l = ss_live_create(1, 2);
    REQUIRE(l);
    ss_http *h = start_(NULL, NULL, l);
    REQUIRE(h);
    int fd = connect_(ss_http_port(h));
    REQUIRE(fd >= 0);
    const char req[] = "GET /api/runs/1/stream HTTP/1.0\r\n\r\n";
    REQUIRE(write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1));
    ss_buf b = {0};
    CHECK(read_until(fd, &b, ": stepscope event stream") == 0);
    CHECK(strstr(b.data, "Content-Type: text/event-stream") != NULL);
    step_fx fx;
    fx_build(&fx, 7);
    ss_live_step(l, &fx.v, names_);
    ss_finding f = finding_();
    ss_live_finding(l, &f);
    CHECK(read_until(fd, &b, "event: finding\ndata: ") == 0);
    ss_buf step = {0};
    ss_obj_step(&step, &fx.v, names_);
    char want[2048];
    snprintf(want, sizeof want, "event: step\ndata: %s\n\n", step.data);
    CHECK(strstr(b.data, want) != NULL);
    ss_buf_free(&step);
    CHECK(read_until(fd, &b, "\"message\":\"rank 1 is slow\"}\n\n") == 0);
    ss_live_finish(l);
    CHECK(read_until(fd, &b, "event: end\ndata: {}\n\n") == 0);
    char c;
    CHECK(read(fd, &c, 1) == 0); /* and the server closes it */
    close(fd);
    ss_buf_free(&b);
    ss_http_stop(h);
    ss_live_destroy(l);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void stop_ends_open_streams(void)
{
    ss_live *l = ss_live_create(1, 2);
    REQUIRE(l);
    ss_http *h = start_(NULL, NULL, l);
    REQUIRE(h);
    int fd = connect_(ss_http_port(h));
    REQUIRE(fd >= 0);
    const char req[] = "GET /api/runs/1/stream HTTP/1.0\r\n\r\n";
    REQUIRE(write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1));
    ss_buf b = {0};
    CHECK(read_until(fd, &b, ": stepscope event stream") == 0);
    double t0 = now_s();
    ss_http_stop(h);
    double took = now_s() - t0;
    CHECK(took < 2.0);
    close(fd);
    ss_buf_free(&b);
    ss_live_destroy(l);
}


/* A document that takes long to build: the stacks hook of a controller
 * whose ranks answer slowly, 1.5 s; or, while slow_held is set, until it
 * is cleared (10 s at most). */
static int slow_calls; /* atomic */
static int slow_held;  /* atomic */

static unsigned slow_stacks(void *ctx, int flags, ss_buf *out)
{
    (void)ctx;
    (void)flags;
    __atomic_add_fetch(&slow_calls, 1, __ATOMIC_RELAXED);
    double t0 = now_s();
    if (!__atomic_load_n(&slow_held, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {1, 500000000};
        nanosleep(&ts, NULL);
    }
    while (__atomic_load_n(&slow_held, __ATOMIC_ACQUIRE) &&
           now_s() - t0 < 10.0)
        usleep(2000);
    ss_buf_puts(out, "{\"slow\":true}");
    return 200;
}

/* Waits until PORT refuses connections (the server's stop has begun: it
 * closes its listening socket once nothing new may start); 0 when it
 * does within SECONDS. */
static int wait_refused(uint16_t port, double seconds)
{
    double t0 = now_s();
    while (now_s() - t0 < seconds) {
        int fd = connect_(port);
        if (fd < 0)
            return 0;
        close(fd);
        usleep(1000);
    }
    return -1;
}

typedef struct {
    ss_http *h;
    double took; /* seconds ss_http_stop took */
} stopper;

static void *stop_server(void *arg)
{
    stopper *s = arg;
    double t0 = now_s();
    ss_http_stop(s->h);
    s->took = now_s() - t0;
    return NULL;
}

/* Opens a connection and sends a POST of the stacks, reading nothing. */
static int post_stacks_unread(uint16_t port)
{
    int fd = connect_(port);
    static const char req[] = "POST /api/runs/1/stacks HTTP/1.0\r\n"
                              "Host: 127.0.0.1\r\n\r\n";
    if (fd >= 0 &&
        write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Reads FD's answer until the server closes it; its status, 0 when it
 * closed without one. */
static int status_until_closed(int fd)
{
    ss_buf b = {0};
    char chunk[4096];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0)
        ss_buf_add(&b, chunk, (size_t)n);
    int status = 0;
    if (b.data && sscanf(b.data, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    ss_buf_free(&b);
    close(fd);
    return status;
}

/* Documents that take seconds to build, one on every worker, do not hold
 * the workers' other connections: the page, /api/live and a document from
 * the store are answered meanwhile; the slow ones are answered too.  As
 * many slow ones as they may take of the builders, and more waiting, do
 * not hold a document from the store either.  A stop while documents are
 * built waits for them, and answers what still waits for a builder 503,
 * or closes it. */
static void slow_documents_hold_no_other_request(void)
{
    ss_live *l = ss_live_create(1, 2);
    REQUIRE(l);
    ss_http *h = start_with_stacks(l, slow_stacks);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    __atomic_store_n(&slow_calls, 0, __ATOMIC_RELAXED);
    int slow[SS_HTTP_WORKERS];
    double t0 = now_s();
    for (int i = 0; i < SS_HTTP_WORKERS; i++)
        REQUIRE((slow[i] = post_stacks_unread(port)) >= 0);
    while (__atomic_load_n(&slow_calls, __ATOMIC_RELAXED) < SS_HTTP_WORKERS &&
           now_s() - t0 < 5.0)
        usleep(1000);
    CHECK_EQ_INT(__atomic_load_n(&slow_calls, __ATOMIC_RELAXED),
                 SS_HTTP_WORKERS);
    static const char *const quick[] = {"/", "/api/live", "/api/runs",
                                        "/api/runs/1/ranks"};
    for (size_t i = 0; i < sizeof quick / sizeof quick[0]; i++) {
        double t = now_s();
        response r;
        REQUIRE(get(port, quick[i], NULL, &r) == 0);
        double took = now_s() - t;
        CHECK_EQ_INT(r.status, 200);
        if (took >= 0.75)
            fprintf(stderr, "  %s took %.2f s\n", quick[i], took);
        CHECK(took < 0.75); /* the slow ones build for 1.5 s */
        free(r.body);
    }
    for (int i = 0; i < SS_HTTP_WORKERS; i++)
        CHECK_EQ_INT(status_until_closed(slow[i]), 200);

    /* Every builder the slow documents may take is busy and two more slow
     * ones wait: a document from the store still finds a builder.  Then a
     * stop, while the slow ones are still being built (they are held until
     * the stop has begun: on a loaded machine a build of a fixed time may
     * end first, and a waiting one then rightly starts). */
    __atomic_store_n(&slow_calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&slow_held, 1, __ATOMIC_RELEASE);
    enum { WAITING = 2, SLOW = SS_HTTP_SLOW_BUILDERS + WAITING };
    int fds[SLOW];
    for (int i = 0; i < SLOW; i++)
        REQUIRE((fds[i] = post_stacks_unread(port)) >= 0);
    t0 = now_s();
    while (__atomic_load_n(&slow_calls, __ATOMIC_RELAXED) <
               SS_HTTP_SLOW_BUILDERS &&
           now_s() - t0 < 5.0)
        usleep(1000);
    usleep(100000); /* the two others reach the queue */
    double t = now_s();
    response r;
    REQUIRE(get(port, "/api/runs/1/findings", NULL, &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    CHECK(now_s() - t < 0.75);
    stopper stop = {h, 0};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, stop_server, &stop) == 0);
    CHECK(wait_refused(port, 5.0) == 0);
    __atomic_store_n(&slow_held, 0, __ATOMIC_RELEASE);
    pthread_join(thread, NULL);
    CHECK(stop.took < 3.0); /* what is built finishes; nothing else waits */
    CHECK_EQ_INT(__atomic_load_n(&slow_calls, __ATOMIC_RELAXED),
                 SS_HTTP_SLOW_BUILDERS); /* the two waiting are not built */
    for (int i = 0; i < SLOW; i++) {
        int status = status_until_closed(fds[i]);
        CHECK(status == 0 || status == 200 || status == 503);
    }
    ss_live_destroy(l);
}

/* ---- hostile clients ---- */

static ss_http *start_limited_(const char *host, const char *token,
                               unsigned max_conns, unsigned per_address,
                               unsigned timeout_ms)
{
    char err[512] = "";
    ss_http_config cfg = {host, 0, 0, fixture(), NULL, token, NULL, NULL,
                          NULL, NULL, NULL, NULL};
    ss_http_limits lim = {max_conns, per_address, timeout_ms};
    ss_http *h = ss_http_start_limited(&cfg, &lim, err, sizeof err);
    if (!h)
        fprintf(stderr, "  ss_http_start_limited: %s\n", err);
    return h;
}

/* A connection that sent the start of a request and nothing more. */
static int connect_partial(uint16_t port)
{
    int fd = connect_(port);
    static const char part[] = "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (fd >= 0 && write(fd, part, sizeof part - 1) != sizeof part - 1) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Seconds from T0 until the server closes FD (EOF or reset), sending a
 * header line every STEP_MS meanwhile; -1 when it stays open for LIMIT_S. */
static double seconds_until_closed(int fd, double t0, int step_ms,
                                   double limit_s)
{
    struct timeval tv = {0, step_ms * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (now_s() - t0 < limit_s) {
        char c;
        ssize_t n = read(fd, &c, 1);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return now_s() - t0;
        if (send(fd, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL) < 0)
            return now_s() - t0;
    }
    return -1;
}

static void admission_decision(void)
{
    CHECK_EQ_INT(ss_http_admission(0, 10, 0, 2, 0), SS_HTTP_ADMIT);
    CHECK_EQ_INT(ss_http_admission(9, 10, 1, 2, 0), SS_HTTP_ADMIT);
    CHECK_EQ_INT(ss_http_admission(10, 10, 0, 2, 0), SS_HTTP_FULL);
    CHECK_EQ_INT(ss_http_admission(10, 10, 0, 2, 1), SS_HTTP_FULL);
    CHECK_EQ_INT(ss_http_admission(5, 10, 2, 2, 0), SS_HTTP_ADDRESS_FULL);
    /* local clients share the loopback address: no per-address limit */
    CHECK_EQ_INT(ss_http_admission(5, 10, 9, 2, 1), SS_HTTP_ADMIT);
}

/* Slowloris from one address: held, silent or trickling connections do
 * not keep a real request from being answered at once. */
static void idle_connections_do_not_block_requests(void)
{
    enum { N = 300 };
    ss_http *h = start_(NULL, NULL, NULL);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    static int fds[N];
    int held = 0;
    for (int i = 0; i < N; i++)
        if ((fds[held] = connect_partial(port)) >= 0)
            held++;
    CHECK_EQ_INT(held, N);
    double worst = 0;
    for (int round = 0; round < 3; round++) {
        double t0 = now_s();
        response r;
        REQUIRE(get(port, "/api/runs", NULL, &r) == 0);
        CHECK_EQ_INT(r.status, 200);
        free(r.body);
        double took = now_s() - t0;
        worst = took > worst ? took : worst;
    }
    CHECK(worst < 2.0);
    for (int i = 0; i < held; i++)
        close(fds[i]);
    ss_http_stop(h);
}

/* A request that trickles in is cut at the deadline, counted from the
 * connection's start however often bytes arrive; so is a kept-alive
 * connection that sends no next request. */
static void request_deadline_cuts_trickles(void)
{
    ss_http *h = start_limited_(NULL, NULL, 0, 0, 600);
    REQUIRE(h);
    uint16_t port = ss_http_port(h);
    /* Timed from before the connection: the server's deadline counts from
     * its accept, which comes after, however late this thread runs. */
    double t_connect = now_s();
    int fd = connect_partial(port);
    REQUIRE(fd >= 0);
    double took = seconds_until_closed(fd, t_connect, 100, 5.0);
    close(fd);
    CHECK(took >= 0.5 && took < 2.0);
    if (took < 0.5 || took >= 2.0)
        fprintf(stderr, "  trickling connection closed after %.2f s\n", took);

    /* The next request's deadline counts from the server's end of the
     * response, which lies between the request and the moment its end is
     * read here: the lower bound is timed from the request (this thread
     * may read the response late), the upper one from its reading. */
    fd = connect_(port);
    REQUIRE(fd >= 0);
    static const char req[] = "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    double t_request = now_s();
    REQUIRE(write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1));
    ss_buf b = {0};
    CHECK(read_until(fd, &b, "{\"runs\":[") == 0);
    ss_buf_free(&b);
    double t0 = now_s();
    char c;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (read(fd, &c, 1) > 0)
        ;
    double t_closed = now_s();
    took = t_closed - t0;
    CHECK(t_closed - t_request >= 0.5 && took < 2.0);
    if (t_closed - t_request < 0.5 || took >= 2.0)
        fprintf(stderr, "  kept-alive connection closed %.2f s after the "
                "request, %.2f s after the response\n", t_closed - t_request,
                took);
    close(fd);

    response r;
    REQUIRE(get(port, "/metrics", NULL, &r) == 0);
    CHECK(strstr(r.body, "stepscope_http_request_timeouts_total 2\n"));
    free(r.body);
    ss_http_stop(h);
}

/* Over the connection limit a client gets 503 with a JSON body (not a
 * reset), and room again once others close. */
static void over_the_limit_gets_503_json(void)
{
    enum { LIMIT = 4 };
    ss_http *h = start_limited_(NULL, NULL, LIMIT, 0, 0);
    REQUIRE(h);
    CHECK_EQ_INT(ss_http_max_connections(h), LIMIT);
    uint16_t port = ss_http_port(h);
    int fds[LIMIT];
    for (int i = 0; i < LIMIT; i++)
        fds[i] = connect_partial(port);
    usleep(300 * 1000); /* admitted */
    for (int round = 0; round < 3; round++) {
        response r;
        REQUIRE(get(port, "/api/runs", NULL, &r) == 0);
        CHECK_EQ_INT(r.status, 503);
        CHECK(strstr(r.head, "Content-Type: application/json") != NULL);
        CHECK(strstr(r.head, "Retry-After: 1") != NULL);
        CHECK(strncmp(r.body, "{\"error\":\"the server is busy: 4 "
                              "connections are open", 40) == 0);
        free(r.body);
    }
    close(fds[0]);
    /* Room again once the server has seen that close, which a loaded
     * machine delays: ask until it answers (20 s at most), counting the
     * refusals met on the way. */
    int refused = 3;
    response r;
    for (double t0 = now_s();;) {
        REQUIRE(get(port, "/metrics", NULL, &r) == 0);
        if (r.status != 503 || now_s() - t0 > 20)
            break;
        refused++;
        free(r.body);
        usleep(50 * 1000);
    }
    CHECK_EQ_INT(r.status, 200);
    char want[64];
    snprintf(want, sizeof want, "stepscope_http_refused_total %d\n", refused);
    CHECK(strstr(r.body, want) != NULL);
    free(r.body);
    for (int i = 1; i < LIMIT; i++)
        close(fds[i]);
    ss_http_stop(h);
}

/* A non-loopback IPv4 address of this host, or 0 when it has none. */
static int local_ipv4(struct in_addr *out)
{
    struct ifaddrs *ifs, *i;
    if (getifaddrs(&ifs) != 0)
        return 0;
    int found = 0;
    for (i = ifs; i && !found; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            *out = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            found = (ntohl(out->s_addr) >> 24) != 127;
        }
    freeifaddrs(ifs);
    return found;
}

/* One remote address may hold SS_HTTP_MAX_PER_ADDRESS connections (here
 * 3); loopback clients are not limited by it. */
static void per_address_limit(void)
{
    struct in_addr self;
    if (!local_ipv4(&self)) {
        printf("  skipped: no non-loopback IPv4 address\n");
        return;
    }
    ss_http *h = start_limited_("0.0.0.0", "tok", 0, 3, 0);
    REQUIRE(h);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(ss_http_port(h)),
                            .sin_addr = self};
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(fds[i] >= 0);
        struct timeval tv = {5, 0};
        setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        REQUIRE(connect(fds[i], (struct sockaddr *)&a, sizeof a) == 0);
        usleep(100 * 1000);
    }
    char buf[1024] = "";
    ssize_t n = read(fds[3], buf, sizeof buf - 1);
    CHECK(n > 0);
    buf[n > 0 ? n : 0] = '\0';
    CHECK(strncmp(buf, "HTTP/1.1 503 ", 13) == 0);
    CHECK(strstr(buf, "{\"error\":\"too many connections from your "
                      "address") != NULL);
    response r;
    REQUIRE(get(ss_http_port(h), "/api/runs", "Authorization: Bearer tok\r\n",
                &r) == 0);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    ss_http_stop(h);
}

static void live_file(void)
{
    ss_http *h = start_(NULL, NULL, NULL);
    REQUIRE(h);
    char db[600], path[PATH_MAX], err[256] = "";
    testing_tmp_path("live.db", db, sizeof db);
    mode_t old_mask = umask(0);
    CHECK_EQ_INT(ss_http_live_file_write(db, 42, h, NULL, path, sizeof path,
                                         err, sizeof err), 0);
    umask(old_mask);
    CHECK(strstr(path, "/live.db.d/live/run-42.json") != NULL);
    struct stat sb;
    REQUIRE(stat(path, &sb) == 0);
    CHECK_EQ_INT(sb.st_mode & 0777, 0600);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    REQUIRE(stat(dir, &sb) == 0);
    CHECK_EQ_INT(sb.st_mode & 0777, 0700);
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    char text[512] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    char want[512];
    snprintf(want, sizeof want, "{\"url\":\"%s\",\"pid\":%ld,\"run_id\":42}\n",
             ss_http_url(h), (long)getpid());
    CHECK_STR(text, want);
    ss_http_live_file_remove(path);
    CHECK(stat(path, &sb) != 0 && errno == ENOENT);
    ss_http_stop(h);
}

TEST_LIST(TEST(endpoints_answer_json), TEST(bad_requests_get_4xx_json),
          TEST(authorization_decision), TEST(token_required_beyond_loopback),
          TEST(host_and_origin_decision),
          TEST(foreign_host_and_origin_refused), TEST(stacks_by_post_only),
          TEST(recent_of_a_live_rank),
          TEST(profile_endpoint),
          TEST(addresses), TEST(busy_port), TEST(static_files),
          TEST(live_endpoints), TEST(event_stream),
          TEST(stop_ends_open_streams),
          TEST(slow_documents_hold_no_other_request),
          TEST(admission_decision),
          TEST(idle_connections_do_not_block_requests),
          TEST(request_deadline_cuts_trickles),
          TEST(over_the_limit_gets_503_json), TEST(per_address_limit),
          TEST(live_file))
