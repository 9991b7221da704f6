/*
 * http_routes.c - the /api/... documents (http_state.h, docs/api.md):
 * which document a path names, its query arguments, and the document
 * built from the store (query.h) or asked of the live controller (stacks,
 * profiles).
 *
 * /api/runs, /api/live, /api/history and /api/diff are named here;
 * /api/runs/{id}/{doc} is looked up in run_docs.  Every document but /steps
 * (http_steps.c) and the event stream (http_stream.c) is built in one go
 * with a store connection from the pool and answered by
 * ss__http_reply_document.
 */
#include "http_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clocks.h"
#include "numparse.h"

typedef enum {
    DOC_RUN, DOC_STEPS, DOC_HEATMAP, DOC_RANKS, DOC_FINDINGS, DOC_EVENTS,
    DOC_STREAM, DOC_HOST, DOC_HISTORY, DOC_NODES, DOC_GOODPUT, DOC_STACKS,
    DOC_PROFILE, DOC_VALUES, DOC_RECENT
} doc_kind;

static const struct {
    const char *name;
    doc_kind kind;
} run_docs[] = {
    {"", DOC_RUN},           {"steps", DOC_STEPS},
    {"heatmap", DOC_HEATMAP}, {"ranks", DOC_RANKS},
    {"findings", DOC_FINDINGS}, {"events", DOC_EVENTS},
    {"stream", DOC_STREAM},   {"host", DOC_HOST},
    {"history", DOC_HISTORY}, {"nodes", DOC_NODES}, {"goodput", DOC_GOODPUT}, {"stacks", DOC_STACKS},
    {"profile", DOC_PROFILE}, {"values", DOC_VALUES},
    {"recent", DOC_RECENT},
};

/* The kind of document /api/runs/{id}/DOC names, or -1. */
static int doc_kind_of(const char *doc)
{
    if (strncmp(doc, "values/", 7) == 0)
        return DOC_VALUES;
    for (size_t i = 0; i < sizeof run_docs / sizeof run_docs[0]; i++)
        if (strcmp(doc, run_docs[i].name) == 0)
            return (int)run_docs[i].kind;
    return -1;
}

ss_http_route_cost ss__http_route_cost(const char *path)
{
    if (strcmp(path, "/api/live") == 0)
        return SS_ROUTE_AT_ONCE;
    if (strncmp(path, "/api/runs/", 10) != 0)
        return SS_ROUTE_BUILT;
    const char *slash = strchr(path + 10, '/');
    switch (doc_kind_of(slash ? slash + 1 : "")) {
    case DOC_STREAM:
        return SS_ROUTE_AT_ONCE;
    case DOC_HEATMAP: case DOC_HOST: case DOC_VALUES: /* windows of steps */
    case DOC_STACKS: case DOC_PROFILE: case DOC_RECENT: /* asked of ranks */
        return SS_ROUTE_SLOW;
    default:
        return SS_ROUTE_BUILT;
    }
}

/* Answers /api/runs/{RUN_ID}/history, or /api/history?name=NAME when
 * RUN_ID is 0: guard's judgement of the run and the history of its
 * comparable runs (query.h). */
static enum MHD_Result serve_history(ss_http *h, struct MHD_Connection *c,
                                     int64_t run_id)
{
    enum MHD_Result ret = MHD_NO;
    ss_query_history_args a = {run_id, NULL, NULL, SS_QUERY_DEFAULT_HISTORY};
    if (ss__http_arg_text(c, "metric", &a.metric, &ret) ||
        ss__http_arg_i64(c, "last", 1, SS_QUERY_MAX_HISTORY, &a.last, &ret))
        return ret;
    if (!run_id) {
        if (ss__http_arg_text(c, "name", &a.name, &ret))
            return ret;
        if (!a.name)
            return ss__http_reply_error(
                c, MHD_HTTP_BAD_REQUEST,
                "/api/history needs ?name=NAME (a run name, as in /api/runs)");
    }
    char err[512] = "";
    ss_query *q = ss__http_pool_get(h, err, sizeof err);
    if (!q)
        return ss__http_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", err);
    ss_buf b = {0};
    int rc = ss_query_history(q, &a, &b, err, sizeof err);
    ss__http_pool_put(h, q);
    if (rc == 0)
        ss_buf_puts(&b, "\n");
    if (rc == 0 && b.oom)
        rc = SS_QUERY_ERROR;
    if (rc != 0) {
        if (b.oom)
            snprintf(err, sizeof err, "out of memory");
        ss_buf_free(&b);
        return ss__http_reply_error(c, rc == SS_QUERY_NOT_FOUND
                                           ? MHD_HTTP_NOT_FOUND
                                           : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                    "%s", err);
    }
    return ss__http_reply_document(h, c, &b);
}

/* Answers /api/diff?a=RUN&b=RUN: do the two runs compute the same bits
 * (query.h, docs/consistency.md)? */
static enum MHD_Result serve_diff(ss_http *h, struct MHD_Connection *c)
{
    enum MHD_Result ret = MHD_NO;
    int64_t a = -1, b = -1;
    if (ss__http_arg_i64(c, "a", 1, INT64_MAX, &a, &ret) ||
        ss__http_arg_i64(c, "b", 1, INT64_MAX, &b, &ret))
        return ret;
    if (a < 0 || b < 0)
        return ss__http_reply_error(
            c, MHD_HTTP_BAD_REQUEST,
            "/api/diff needs ?a=RUN&b=RUN (two run ids, as in /api/runs)");
    char err[512] = "";
    ss_query *q = ss__http_pool_get(h, err, sizeof err);
    if (!q)
        return ss__http_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", err);
    ss_buf out = {0};
    int rc = ss_query_diff(q, a, b, &out, err, sizeof err);
    ss__http_pool_put(h, q);
    if (rc == 0 && out.oom) {
        snprintf(err, sizeof err, "out of memory");
        rc = SS_QUERY_ERROR;
    }
    if (rc != 0) {
        ss_buf_free(&out);
        return ss__http_reply_error(c, rc == SS_QUERY_NOT_FOUND
                                           ? MHD_HTTP_NOT_FOUND
                                           : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                    "%s", err);
    }
    return ss__http_reply_document(h, c, &out);
}

/* Replies what a live controller's hook (stacks, recent) answered: its
 * JSON document B with 200, else STATUS with B's one-line reason (NONE
 * when it gave none).  Frees or hands on B. */
static enum MHD_Result reply_hook(ss_http *h, struct MHD_Connection *c,
                                  unsigned status, ss_buf *b,
                                  const char *none)
{
    if (status != MHD_HTTP_OK || b->oom) {
        enum MHD_Result ret = ss__http_reply_error(
            c, b->oom ? MHD_HTTP_INTERNAL_SERVER_ERROR : status, "%s",
            b->oom ? "out of memory" : b->data ? b->data : none);
        ss_buf_free(b);
        return ret;
    }
    ss_buf_puts(b, "\n");
    return ss__http_reply_document(h, c, b);
}

/* Answers POST /api/runs/{id}/stacks: asks the live controller for every
 * rank's stacks.  It signals the ranks (and with native=1 attaches to
 * them), so it is never done for a GET or a HEAD: a page of another site
 * can make a browser send those to a loopback server. */
static enum MHD_Result serve_stacks(ss_http *h, struct MHD_Connection *c,
                                    int64_t run_id, int post)
{
    if (!post)
        return ss__http_reply_error(
            c, MHD_HTTP_METHOD_NOT_ALLOWED,
            "stacks are taken by POST /api/runs/%lld/stacks (it signals every "
            "rank); `stepscope stacks` does that, and `stepscope report` "
            "shows the stacks stored for a run",
            (long long)run_id);
    if (!h->stacks || !h->live || ss_live_run_id(h->live) != run_id)
        return ss__http_reply_error(
            c, MHD_HTTP_NOT_FOUND,
            "run %lld is not live here: stacks come from a running job's "
            "controller (`stepscope report` shows the stacks stored for a "
            "run)",
            (long long)run_id);
    const char *nat = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                  "native");
    int native = nat && (strcmp(nat, "1") == 0 || strcmp(nat, "true") == 0);
    if (nat && !native && strcmp(nat, "0") != 0 && strcmp(nat, "false") != 0)
        return ss__http_reply_error(c, MHD_HTTP_BAD_REQUEST,
                                    "native must be 0 or 1");
    /* ranks=0: without the ranks' objects (what `stepscope stacks`
     * prints needs none of them) */
    const char *rk = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                 "ranks");
    if (rk && strcmp(rk, "0") != 0 && strcmp(rk, "1") != 0)
        return ss__http_reply_error(c, MHD_HTTP_BAD_REQUEST,
                                    "ranks must be 0 or 1");
    int flags = (native ? SS_HTTP_STACKS_NATIVE : 0) |
                (rk && strcmp(rk, "0") == 0 ? SS_HTTP_STACKS_BRIEF : 0);
    ss_buf b = {0};
    unsigned status = h->stacks(h->stacks_ctx, flags, &b);
    return reply_hook(h, c, status, &b, "no stacks");
}

/* Answers /api/runs/{id}/profile: POST (START 1) asks the live run's
 * ranks for a profile, GET tells how a request stands (docs/debug.md). */
static enum MHD_Result serve_profile(ss_http *h, struct MHD_Connection *c,
                                     int64_t run_id, int start)
{
    if (!h->profile || !h->live || ss_live_run_id(h->live) != run_id)
        return ss__http_reply_error(c, MHD_HTTP_NOT_FOUND,
                                    "run %lld is not live here: profiles are "
                                    "taken by a running job's controller",
                                    (long long)run_id);
    const char *ranks = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                    "ranks");
    const char *secs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                   "seconds");
    const char *req = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                  "request");
    ss_buf b = {0};
    unsigned status = h->profile(h->profile_ctx, start, ranks, secs, req, &b);
    if (b.oom || (status != MHD_HTTP_OK && status != MHD_HTTP_ACCEPTED)) {
        enum MHD_Result ret = ss__http_reply_error(
                     c, b.oom ? MHD_HTTP_INTERNAL_SERVER_ERROR : status, "%s",
                     b.oom ? "out of memory" : b.data ? b.data : "no profile");
        ss_buf_free(&b);
        return ret;
    }
    ss_buf_puts(&b, "\n");
    return ss__http_reply(c, status, JSON_TYPE, &b);
}

/* Answers /api/runs/{RUN_ID}/values (NAME NULL: the list of vector
 * names) and /api/runs/{RUN_ID}/values/{NAME}?rank=R or ?index=I, with
 * from, to, limit (cells) and attempt (docs/api.md). */
static enum MHD_Result serve_values(ss_http *h, struct MHD_Connection *c,
                                    int64_t run_id, const char *name)
{
    enum MHD_Result ret = MHD_NO;
    ss_query_values_args a = {-1, name, -1, -1, -1, -1,
                              SS_QUERY_DEFAULT_VALUE_CELLS};
    if (ss__http_arg_i64(c, "attempt", 0, INT32_MAX, &a.attempt, &ret))
        return ret;
    if (name) {
        if (!*name || strlen(name) > 1024)
            return ss__http_reply_error(
                c, MHD_HTTP_BAD_REQUEST,
                "bad vector name (/api/runs/%lld/values lists them)",
                (long long)run_id);
        if (ss__http_arg_i64(c, "rank", 0, INT32_MAX, &a.rank, &ret) ||
            ss__http_arg_i64(c, "index", 0, INT32_MAX, &a.index, &ret) ||
            ss__http_arg_i64(c, "from", 0, INT64_MAX, &a.from, &ret) ||
            ss__http_arg_i64(c, "to", 0, INT64_MAX, &a.to, &ret) ||
            ss__http_arg_i64(c, "limit", 1, SS_QUERY_MAX_VALUE_CELLS, &a.limit,
                             &ret))
            return ret;
        if ((a.rank >= 0) == (a.index >= 0))
            return ss__http_reply_error(
                c, MHD_HTTP_BAD_REQUEST,
                "give ?rank=R (its vectors by step) or ?index=I (that element "
                "over ranks by step), one of them");
        if (a.from >= 0 && a.to >= 0 && a.to < a.from)
            return ss__http_reply_error(
                c, MHD_HTTP_BAD_REQUEST,
                "to (%" PRId64 ") is below from (%" PRId64 ")", a.to, a.from);
    }
    char err[512] = "";
    ss_query *q = ss__http_pool_get(h, err, sizeof err);
    if (!q)
        return ss__http_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", err);
    ss_buf b = {0};
    int rc = name ? ss_query_value_series(q, run_id, &a, &b, err, sizeof err)
                  : ss_query_values(q, run_id, a.attempt, &b, err,
                                    sizeof err);
    ss__http_pool_put(h, q);
    if (rc == 0)
        ss_buf_puts(&b, "\n");
    if (rc == 0 && b.oom) {
        snprintf(err, sizeof err, "out of memory");
        rc = SS_QUERY_ERROR;
    }
    if (rc != 0) {
        ss_buf_free(&b);
        return ss__http_reply_error(c, rc == SS_QUERY_NOT_FOUND
                                           ? MHD_HTTP_NOT_FOUND
                                           : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                    "%s", err);
    }
    return ss__http_reply_document(h, c, &b);
}

/* Answers GET /api/runs/{id}/recent?rank=R[&steps=N]: one rank's latest
 * steps, kept where its records pass (its node's agent, or node 0), for
 * the live run only. */
static enum MHD_Result serve_recent(ss_http *h, struct MHD_Connection *c,
                                    int64_t run_id)
{
    if (!h->recent || !h->live || ss_live_run_id(h->live) != run_id)
        return ss__http_reply_error(
            c, MHD_HTTP_NOT_FOUND,
            "run %lld is not live here: a rank's recent steps come from a "
            "running job's controller (/api/runs/%lld/steps and `stepscope "
            "report --rank R` read what the store kept)",
            (long long)run_id, (long long)run_id);
    enum MHD_Result ret = MHD_NO;
    int64_t rank = -1, steps = SS_HTTP_RECENT_DEFAULT_STEPS;
    if (ss__http_arg_i64(c, "rank", 0, INT32_MAX, &rank, &ret) ||
        ss__http_arg_i64(c, "steps", 1, SS_HTTP_RECENT_MAX_STEPS, &steps,
                         &ret))
        return ret;
    if (rank < 0)
        return ss__http_reply_error(c, MHD_HTTP_BAD_REQUEST,
                                    "give ?rank=R (and ?steps=N, 1 to %d)",
                                    SS_HTTP_RECENT_MAX_STEPS);
    ss_buf b = {0};
    unsigned status = h->recent(h->recent_ctx, (uint32_t)rank,
                                (uint32_t)steps, &b);
    return reply_hook(h, c, status, &b, "no answer");
}

/* Answers /api/runs/{id}[/{doc}]; REST is what follows "/api/runs/".
 * POST is allowed on /profile and /stacks only; /stacks wants it. */
static enum MHD_Result serve_run(ss_http *h, struct MHD_Connection *c,
                                 const char *rest, int head, int post)
{
    char idtext[32];
    size_t idlen = strcspn(rest, "/");
    const char *doc = rest[idlen] == '/' ? rest + idlen + 1 : "";
    snprintf(idtext, sizeof idtext, "%.*s", (int)(idlen < 31 ? idlen : 31),
             rest);
    int kind = doc_kind_of(doc);
    const char *value_name = /* values/{NAME} */
        strncmp(doc, "values/", 7) == 0 ? doc + 7 : NULL;
    if (kind < 0)
        return ss__http_reply_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint "
                                    "/api/runs/%s/%s (docs/api.md lists them)",
                                    idtext, doc);
    int64_t run_id;
    if (idlen > 18 || ss_parse_i64(idtext, 1, INT64_MAX, &run_id) != 0)
        return ss__http_reply_error(
            c, MHD_HTTP_BAD_REQUEST,
            "bad run id '%s' (a positive integer, as in /api/runs)", idtext);
    long long id = run_id;
    if (post && kind != DOC_PROFILE && kind != DOC_STACKS)
        return ss__http_reply_error(
            c, MHD_HTTP_METHOD_NOT_ALLOWED,
            "POST is for /api/runs/{id}/profile and /stacks only");
    if (kind == DOC_PROFILE && head)
        return ss__http_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                                    "GET or POST");
    if (kind == DOC_PROFILE)
        return serve_profile(h, c, run_id, post);
    if (kind == DOC_HISTORY)
        return serve_history(h, c, run_id);
    if (kind == DOC_STACKS)
        return serve_stacks(h, c, run_id, post);
    if (kind == DOC_VALUES)
        return serve_values(h, c, run_id, value_name);
    if (kind == DOC_RECENT)
        return serve_recent(h, c, run_id);

    enum MHD_Result ret = MHD_NO;
    ss_query_range rg = {-1, -1, -1, SS_QUERY_DEFAULT_STEPS};
    int64_t after = 0, limit = SS_QUERY_DEFAULT_EVENTS;
    if (ss__http_arg_i64(c, "attempt", 0, INT32_MAX, &rg.attempt, &ret) ||
        ss__http_arg_i64(c, "from", 0, INT64_MAX, &rg.from, &ret) ||
        ss__http_arg_i64(c, "to", 0, INT64_MAX, &rg.to, &ret))
        return ret;
    if (kind == DOC_EVENTS) {
        if (ss__http_arg_i64(c, "after", 0, INT64_MAX, &after, &ret) ||
            ss__http_arg_i64(c, "limit", 1, SS_QUERY_MAX_EVENTS, &limit, &ret))
            return ret;
    } else if (ss__http_arg_i64(c, "limit", 1, SS_QUERY_MAX_STEPS, &rg.limit,
                                &ret)) {
        return ret;
    }
    if (rg.from >= 0 && rg.to >= 0 && rg.to < rg.from)
        return ss__http_reply_error(
            c, MHD_HTTP_BAD_REQUEST,
            "to (%" PRId64 ") is below from (%" PRId64 ")", rg.to, rg.from);

    if (kind == DOC_STREAM) {
        if (head) /* a stream has no end to measure */
            return ss__http_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                                        "GET only");
        if (!h->live || ss_live_run_id(h->live) != id)
            return ss__http_reply_error(c, MHD_HTTP_NOT_FOUND,
                                        "run %lld is not live here; poll "
                                        "/api/runs/%lld/steps?from=N instead",
                                        id, id);
        return ss__http_serve_stream(h, c);
    }

    char err[512] = "";
    ss_query *q = ss__http_pool_get(h, err, sizeof err);
    if (!q)
        return ss__http_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", err);
    ss_buf b = {0};
    ss_query_steps_cursor steps;
    int rc;
    switch ((doc_kind)kind) {
    case DOC_RUN:
        rc = ss_query_run(q, id, rg.attempt, h->live, &b, err, sizeof err);
        break;
    case DOC_STEPS:
        rc = ss_query_steps_start(q, id, &rg, &steps, err, sizeof err);
        break;
    case DOC_HEATMAP:
        rc = ss_query_heatmap(q, id, &rg, &b, err, sizeof err);
        break;
    case DOC_HOST:
        rc = ss_query_host(q, id, &rg, &b, err, sizeof err);
        break;
    case DOC_RANKS:
        rc = ss_query_ranks(q, id, rg.attempt, h->live, &b, err, sizeof err);
        break;
    case DOC_FINDINGS:
        rc = ss_query_findings(q, id, rg.attempt, &b, err, sizeof err);
        break;
    case DOC_NODES:
        rc = ss_query_nodes(q, id, rg.attempt, &b, err, sizeof err);
        break;
    case DOC_GOODPUT:
        rc = ss_query_goodput(q, id, ss_wall_now(), 0, &b, err, sizeof err);
        break;
    default:
        rc = ss_query_events(q, id, after, limit, &b, err, sizeof err);
        break;
    }
    ss__http_pool_put(h, q);
    if (rc == SS_QUERY_NOT_FOUND) {
        ss_buf_free(&b);
        if (rg.attempt >= 0)
            return ss__http_reply_error(c, MHD_HTTP_NOT_FOUND,
                                        "no run %lld with attempt %" PRId64,
                                        id, rg.attempt);
        return ss__http_reply_error(c, MHD_HTTP_NOT_FOUND, "no run %lld", id);
    }
    if (rc != 0) {
        ss_buf_free(&b);
        return ss__http_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s",
                                    err);
    }
    if (kind == DOC_STEPS)
        return ss__http_serve_steps(h, c, &steps);
    ss_buf_puts(&b, "\n");
    if (b.oom) {
        ss_buf_free(&b);
        return ss__http_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                    "out of memory");
    }
    return ss__http_reply_document(h, c, &b);
}

enum MHD_Result ss__http_serve_api(ss_http *h, struct MHD_Connection *c,
                                   const char *path, int head, int post)
{
    if (post && strncmp(path, "/api/runs/", 10) != 0)
        return ss__http_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                                    "POST is for /api/runs/{id}/profile only");
    if (strcmp(path, "/api/runs") == 0) {
        char err[512] = "";
        ss_query *q = ss__http_pool_get(h, err, sizeof err);
        if (!q)
            return ss__http_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s",
                                        err);
        ss_buf b = {0};
        int rc = ss_query_runs(q, h->live, &b, err, sizeof err);
        ss__http_pool_put(h, q);
        ss_buf_puts(&b, "\n");
        if (rc != 0 || b.oom) {
            ss_buf_free(&b);
            return ss__http_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s",
                                        rc ? err : "out of memory");
        }
        return ss__http_reply_document(h, c, &b);
    }
    if (strncmp(path, "/api/runs/", 10) == 0)
        return serve_run(h, c, path + 10, head, post);
    if (strcmp(path, "/api/history") == 0)
        return serve_history(h, c, 0);
    if (strcmp(path, "/api/diff") == 0)
        return serve_diff(h, c);
    if (strcmp(path, "/api/live") == 0) {
        if (!h->live)
            return ss__http_reply_error(c, MHD_HTTP_NOT_FOUND,
                                        "no live run: this is `stepscope "
                                        "serve`, which serves stored runs");
        ss_buf b = {0};
        /* pid: a client polling this address can tell that another
         * controller took the port after this one ended */
        ss_buf_printf(&b, "{\"run_id\":%" PRId64 ",\"world_size\":%" PRIu32
                      ",\"attempt\":%" PRIu32 ",\"running\":%s,\"pid\":%ld}"
                      "\n", ss_live_run_id(h->live), ss_live_world_size(h->live),
                      ss_live_get_attempt(h->live),
                      ss_live_running(h->live) ? "true" : "false",
                      (long)getpid());
        return ss__http_reply(c, MHD_HTTP_OK, JSON_TYPE, &b);
    }
    return ss__http_reply_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint %s "
                                "(docs/api.md lists them)", path);
}
