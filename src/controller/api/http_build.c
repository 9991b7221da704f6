/*
 * http_build.c - the builders: documents built off the workers
 * (http_state.h).
 *
 * A worker thread serves all its connections, so a document that takes
 * seconds to build (a heatmap of a wide store, a profile or the stacks the
 * live controller is asked for) would hold every other connection of that
 * worker meanwhile: their answers unsent, their event streams silent.  So
 * the worker hands such a request to SS_HTTP_BUILDERS builder threads: it
 * suspends the connection and queues the request; a builder runs the
 * route, whose answer is captured instead of queued (ss__http_queue), and
 * resumes the connection; libmicrohttpd then calls the worker's request
 * handler again, which queues the captured answer.  Requests wait for a
 * builder in the order they came; at most SS_HTTP_BUILDERS documents are
 * being built at once, as many as the memory of documents under
 * construction allows for.  The slow ones (a window of steps, or what is
 * asked of the ranks: ss__http_route_cost) take at most
 * SS_HTTP_SLOW_BUILDERS of them, so that the others (a run's findings, the
 * list of runs: built in milliseconds) always find a builder; a slow
 * request that would take more waits while the requests behind it are
 * built.
 *
 * Stopping: the builders answer what is still queued with a 503 without
 * building it, finish what they are building, and end; only then may the
 * workers stop (libmicrohttpd must not stop with a suspended connection).
 */
#include "http_state.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct build_job {
    build_job *next;               /* in h->build_queue */
    struct MHD_Connection *conn;
    char path[512];
    int head, post, metrics;
    int slow;                      /* SS_ROUTE_SLOW */
    int done;                      /* under h->mu */
    unsigned status;               /* the captured answer */
    struct MHD_Response *response; /* NULL: none (close the connection) */
};

/* The answer the current thread captures, when it builds a job. */
static _Thread_local build_job *capturing;

enum MHD_Result ss__http_queue(struct MHD_Connection *c, unsigned status,
                               struct MHD_Response *r)
{
    build_job *j = capturing;
    if (j && j->conn == c) {
        if (j->response) { /* answered twice: the first answer stands */
            MHD_destroy_response(r);
            return MHD_NO;
        }
        j->response = r;
        j->status = status;
        return MHD_YES;
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Builds J's answer on this thread, or a 503 when the server stops. */
static void build(ss_http *h, build_job *j, int stopping)
{
    capturing = j;
    if (stopping)
        ss__http_reply_error(j->conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                             "the server is stopping");
    else if (j->metrics)
        ss__http_serve_metrics(h, j->conn);
    else
        ss__http_serve_api(h, j->conn, j->path, j->head, j->post);
    capturing = NULL;
    pthread_mutex_lock(&h->mu);
    j->done = 1;
    MHD_resume_connection(j->conn);
    pthread_mutex_unlock(&h->mu);
}

/* Takes the first queued job a builder may start now: any when STOPPING
 * (it is answered 503), else the first one that is not slow or finds
 * fewer than SS_HTTP_SLOW_BUILDERS slow ones being built.  NULL when none
 * may.  Called with h->mu held. */
static build_job *take_job_locked(ss_http *h, int stopping)
{
    build_job *prev = NULL;
    for (build_job *j = h->build_queue; j; prev = j, j = j->next) {
        if (!stopping && j->slow && h->slow_building >= SS_HTTP_SLOW_BUILDERS)
            continue;
        if (prev)
            prev->next = j->next;
        else
            h->build_queue = j->next;
        if (h->build_tail == j)
            h->build_tail = prev;
        j->next = NULL;
        return j;
    }
    return NULL;
}

static void *builder_main(void *arg)
{
    ss_http *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        int stopping = __atomic_load_n(&h->stopping, __ATOMIC_ACQUIRE);
        build_job *j = take_job_locked(h, stopping);
        if (!j) {
            if (stopping)
                break;
            pthread_cond_wait(&h->build_cv, &h->mu);
            continue;
        }
        int slow = j->slow && !stopping;
        h->slow_building += slow;
        pthread_mutex_unlock(&h->mu);
        build(h, j, stopping);
        pthread_mutex_lock(&h->mu);
        h->slow_building -= slow; /* a slow one may start: this builder
                                     looks first */
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

int ss__http_builders_start(ss_http *h)
{
    for (int i = 0; i < SS_HTTP_BUILDERS; i++) {
        if (pthread_create(&h->builders[i], NULL, builder_main, h) != 0)
            return -1;
        h->n_builders++;
    }
    return 0;
}

void ss__http_builders_stop(ss_http *h)
{
    pthread_mutex_lock(&h->mu);
    __atomic_store_n(&h->stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&h->build_cv);
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < h->n_builders; i++)
        pthread_join(h->builders[i], NULL);
    /* The queue is empty: a builder ends only once it is, and nothing is
     * queued once the server stops (or while no builder runs). */
    h->n_builders = 0;
}

int ss__http_build_submit(ss_http *h, struct MHD_Connection *c,
                          const char *path, int head, int post, int metrics,
                          int slow, void **con_cls)
{
    if (strlen(path) >= sizeof ((build_job *)0)->path)
        return -1;
    build_job *j = calloc(1, sizeof *j);
    if (!j)
        return -1;
    j->conn = c;
    snprintf(j->path, sizeof j->path, "%s", path);
    j->head = head;
    j->post = post;
    j->metrics = metrics;
    j->slow = slow;
    pthread_mutex_lock(&h->mu);
    if (__atomic_load_n(&h->stopping, __ATOMIC_ACQUIRE) || !h->n_builders) {
        pthread_mutex_unlock(&h->mu);
        free(j);
        return -1;
    }
    /* Suspended before any builder can see it, so that its resume always
     * follows its suspension. */
    MHD_suspend_connection(c);
    if (h->build_tail)
        h->build_tail->next = j;
    else
        h->build_queue = j;
    h->build_tail = j;
    pthread_cond_signal(&h->build_cv);
    pthread_mutex_unlock(&h->mu);
    *con_cls = j;
    return 0;
}

enum MHD_Result ss__http_build_answer(ss_http *h, build_job *j)
{
    pthread_mutex_lock(&h->mu);
    int done = j->done;
    pthread_mutex_unlock(&h->mu);
    if (!done || !j->response)
        return MHD_NO; /* not built (cannot happen) or no answer: close */
    enum MHD_Result ret = MHD_queue_response(j->conn, j->status,
                                             j->response);
    MHD_destroy_response(j->response);
    j->response = NULL;
    return ret;
}

void ss__http_build_free(build_job *j)
{
    if (!j)
        return;
    if (j->response)
        MHD_destroy_response(j->response);
    free(j);
}
