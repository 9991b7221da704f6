/*
 * http_pool.c - the pool of store connections (http_state.h).
 *
 * A request (or a page of a streamed /steps) takes a read-only ss_query
 * from a small pool, opening one when the pool is empty, and returns it
 * afterwards, so a connection is used by one thread at a time and opening
 * costs are paid once per connection, not per request.  At most POOL_MAX
 * idle connections are kept; the server closes them when it stops.
 */
#include "http_state.h"

#include <pthread.h>

ss_query *ss__http_pool_get(ss_http *h, char *err, size_t errlen)
{
    pthread_mutex_lock(&h->mu);
    ss_query *q = h->n_pool ? h->pool[--h->n_pool] : NULL;
    pthread_mutex_unlock(&h->mu);
    return q ? q : ss_query_open(h->db_path, err, errlen);
}

void ss__http_pool_put(ss_http *h, ss_query *q)
{
    pthread_mutex_lock(&h->mu);
    if (h->n_pool < POOL_MAX) {
        h->pool[h->n_pool++] = q;
        q = NULL;
    }
    pthread_mutex_unlock(&h->mu);
    ss_query_close(q);
}
