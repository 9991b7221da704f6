/*
 * http_steps.c - the /api/runs/{id}/steps document, streamed in pages
 * (http_state.h).
 *
 * The window's steps are read PAGE_STEPS at a time while the response is
 * sent (ss_query_steps_page), each page with a store connection from the
 * pool, so a request's memory does not grow with its window.  A store
 * error after the first page cuts the body short; the client sees
 * malformed JSON rather than a silently shorter window.
 */
#include "http_state.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define PAGE_STEPS 256 /* steps per page of a streamed /steps */

typedef struct {
    ss_http *h;
    ss_query_steps_cursor cursor;
    ss_buf pending;  /* at most one page */
    size_t sent;
    int done;        /* the closing "]}" is in PENDING */
} steps_doc;

static ssize_t steps_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    steps_doc *d = cls;
    while (d->sent == d->pending.len) {
        if (d->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        ss_buf_reset(&d->pending);
        d->sent = 0;
        char err[512];
        ss_query *q = ss__http_pool_get(d->h, err, sizeof err);
        if (!q)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        int n = ss_query_steps_page(q, &d->cursor, PAGE_STEPS, &d->pending,
                                    err, sizeof err);
        ss__http_pool_put(d->h, q);
        if (n < 0) /* the client sees the body cut short */
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (n == 0) {
            ss_buf_puts(&d->pending, "]}\n");
            d->done = 1;
        }
        if (d->pending.oom)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = d->pending.len - d->sent;
    if (n > max)
        n = max;
    memcpy(buf, d->pending.data + d->sent, n);
    d->sent += n;
    return (ssize_t)n;
}

static void steps_free(void *cls)
{
    steps_doc *d = cls;
    ss_buf_free(&d->pending);
    free(d);
}

/* Answers 200 with the steps of window CUR (already started), generated
 * page by page while it is sent. */
enum MHD_Result ss__http_serve_steps(ss_http *h, struct MHD_Connection *c,
                                     const ss_query_steps_cursor *cur)
{
    steps_doc *d = calloc(1, sizeof *d);
    if (!d)
        return ss__http_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                    "out of memory");
    d->h = h;
    d->cursor = *cur;
    ss_buf_puts(&d->pending, "{\"steps\":[");
    struct MHD_Response *r = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 16384, steps_read, d, steps_free);
    if (!r) {
        steps_free(d);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, JSON_TYPE);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return ss__http_queue(c, MHD_HTTP_OK, r);
}
