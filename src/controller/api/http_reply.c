/*
 * http_reply.c - answering a request (http_state.h): a document or an
 * error with the server's headers, a static file, and the limit on large
 * documents.
 *
 * Every answer is marked no-store, except static files (no-cache: the
 * browser revalidates).  A document built in one go that is LARGE_DOC_BYTES
 * or more is sent at most MAX_LARGE_DOCS at a time, so that slow or many
 * clients cannot make the server hold an unbounded number of them; the
 * count is under the server's mutex and drops when libmicrohttpd frees
 * the document.  Errors are the JSON document {"error": "..."}.
 */
#include "http_state.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE_DOC_BYTES (1u << 20) /* a built document this big ... */
#define MAX_LARGE_DOCS 8           /* ... is sent at most this many at once */

/* Queues BODY (taken over, freed by libmicrohttpd) with STATUS. */
enum MHD_Result ss__http_reply(struct MHD_Connection *c, unsigned status,
                               const char *type, ss_buf *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        body->len, body->data ? body->data : (void *)"",
        body->data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        ss_buf_free(body);
        return MHD_NO;
    }
    memset(body, 0, sizeof *body); /* owned by the response now */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
                                "GET, HEAD, POST");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer realm=\"stepscope\"");
    return ss__http_queue(c, status, r);
}

enum MHD_Result ss__http_reply_error(struct MHD_Connection *c, unsigned status,
                                     const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ss_buf b = {0};
    ss_buf_puts(&b, "{\"error\":");
    ss_buf_json_str(&b, msg);
    ss_buf_puts(&b, "}\n");
    if (b.oom) {
        ss_buf_free(&b);
        return MHD_NO;
    }
    return ss__http_reply(c, status, JSON_TYPE, &b);
}

typedef struct {
    ss_http *h;
    char *data;
} large_doc;

static void large_doc_free(void *cls)
{
    large_doc *d = cls;
    pthread_mutex_lock(&d->h->mu);
    d->h->large_docs--;
    pthread_mutex_unlock(&d->h->mu);
    free(d->data);
    free(d);
}

/* Answers 200 with the JSON document BODY (taken over).  Built documents
 * of LARGE_DOC_BYTES or more are sent at most MAX_LARGE_DOCS at a time, so
 * slow or many clients cannot make the server hold an unbounded number of
 * them; over that, 503 (retry). */
enum MHD_Result ss__http_reply_document(ss_http *h, struct MHD_Connection *c,
                                        ss_buf *body)
{
    if (body->len < LARGE_DOC_BYTES)
        return ss__http_reply(c, MHD_HTTP_OK, JSON_TYPE, body);
    pthread_mutex_lock(&h->mu);
    int admitted = h->large_docs < MAX_LARGE_DOCS;
    h->large_docs += (unsigned)admitted;
    pthread_mutex_unlock(&h->mu);
    if (!admitted) {
        ss_buf_free(body);
        return ss__http_reply_error(
            c, MHD_HTTP_SERVICE_UNAVAILABLE,
            "busy: %d large documents are being sent; retry, or ask for a "
            "smaller window (limit=)",
            MAX_LARGE_DOCS);
    }
    large_doc *d = malloc(sizeof *d);
    struct MHD_Response *r = NULL;
    if (d) {
        *d = (large_doc){h, body->data};
        r = MHD_create_response_from_buffer_with_free_callback_cls(
            body->len, body->data, large_doc_free, d);
    }
    if (!r) {
        free(d);
        ss_buf_free(body);
        pthread_mutex_lock(&h->mu);
        h->large_docs--;
        pthread_mutex_unlock(&h->mu);
        return MHD_NO;
    }
    memset(body, 0, sizeof *body); /* owned by the response now */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, JSON_TYPE);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return ss__http_queue(c, MHD_HTTP_OK, r);
}

enum MHD_Result ss__http_reply_static(struct MHD_Connection *c,
                                      const ss_static_file *f)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        f->len, (void *)f->data, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, f->content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return ss__http_queue(c, MHD_HTTP_OK, r);
}
