/*
 * store_bind.c - binding values to the writer's statements and building a
 * rank-step row's JSON objects (store_bind.h).
 */
#include "store_bind.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store_sql.h"

void ss__bind_opt_int(sqlite3_stmt *st, int i, int64_t v)
{
    if (v == SS_MISSING)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

void ss__bind_rank(sqlite3_stmt *st, int i, int32_t rank)
{
    if (rank < 0)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int(st, i, rank);
}

void ss__bind_known_int(sqlite3_stmt *st, int i, int64_t v)
{
    if (v == -1)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

void ss__bind_known_text(sqlite3_stmt *st, int i, const char *s)
{
    if (!s || !*s)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

void ss__bind_json(sqlite3_stmt *st, int i, const ss_buf *b)
{
    if (b->len)
        sqlite3_bind_text(st, i, b->data, (int)b->len, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

void ss__bind_host(sqlite3_stmt *st, const ss_host_step *h)
{
    static const ss_host_step none = {SS_MISSING, SS_MISSING, SS_MISSING,
                                      SS_MISSING, SS_MISSING, SS_MISSING,
                                      SS_MISSING, SS_MISSING, SS_MISSING,
                                      SS_MISSING, SS_MISSING, {0}};
    if (!h)
        h = &none;
    const int64_t v[] = {h->cpu_ns, h->runq_ns, h->stopped_ns,
                         h->throttled_ns, h->nr_throttled, h->vol_switches,
                         h->invol_switches, h->major_faults, h->psi_cpu_ns,
                         h->psi_memory_ns, h->psi_io_ns};
    for (int i = 0; i < (int)(sizeof v / sizeof v[0]); i++)
        ss__bind_opt_int(st, SS__HOST_FIRST_PARAM + i, v[i]);
    const ss_gpu_evidence *g = &h->gpu;
    const int64_t gv[] = {g->index, g->covered_ns, g->slowed_ns,
                          g->power_cap_ns, g->thermal_ns, g->hw_slowdown_ns,
                          g->sm_clock_mhz, g->temperature_c, g->ecc_new,
                          g->xid_new, g->last_xid};
    for (int i = 0; i < (int)(sizeof gv / sizeof gv[0]); i++)
        ss__bind_opt_int(st, SS__GPU_FIRST_PARAM + i,
                         g->present ? gv[i] : SS_MISSING);
}

int ss__json_keys_set(ss__json_keys *k, char *const *names, uint32_t n)
{
    if (n + 1 > k->cap) {
        size_t *o = realloc(k->off, (n + 1) * sizeof *o);
        if (!o)
            return -1;
        k->off = o;
        k->cap = n + 1;
    }
    ss_buf_reset(&k->text);
    for (uint32_t i = 0; i < n; i++) {
        k->off[i] = k->text.len;
        ss_buf_add(&k->text, ",", 1);
        ss_buf_json_str(&k->text, names[i]);
        ss_buf_add(&k->text, ":", 1);
    }
    k->off[n] = k->text.len;
    return k->text.oom ? -1 : 0;
}

void ss__json_keys_free(ss__json_keys *k)
{
    ss_buf_free(&k->text);
    free(k->off);
    memset(k, 0, sizeof *k);
}

/* Appends member I of a JSON object under construction in B: its key from
 * K with the comma, or after a '{' when it is the first member. */
static void add_key(ss_buf *b, const ss__json_keys *k, uint32_t i)
{
    const char *key = k->text.data + k->off[i];
    size_t len = k->off[i + 1] - k->off[i];
    if (b->len == 0) {
        ss_buf_add(b, "{", 1);
        key++;
        len--;
    }
    ss_buf_add(b, key, len);
}

int ss__json_object(ss_buf *b, const int64_t *vals, uint32_t n,
                    const ss__json_keys *k, int64_t omit)
{
    ss_buf_reset(b);
    for (uint32_t i = 0; i < n; i++) {
        if (vals[i] == SS_MISSING || vals[i] == omit)
            continue;
        add_key(b, k, i);
        ss_buf_json_int(b, vals[i]);
    }
    if (b->len)
        ss_buf_add(b, "}", 1);
    return b->oom ? -1 : 0;
}

int ss__json_doubles(ss_buf *b, const int64_t *bits, uint32_t n,
                     const ss__json_keys *k)
{
    ss_buf_reset(b);
    for (uint32_t i = 0; i < n; i++) {
        double d;
        memcpy(&d, &bits[i], sizeof d);
        if (!isfinite(d))
            continue;
        add_key(b, k, i);
        ss_buf_printf(b, "%.17g", d);
    }
    if (b->len)
        ss_buf_add(b, "}", 1);
    return b->oom ? -1 : 0;
}

int ss__json_self(ss_buf *b, const int64_t *total, const int64_t *self,
                  uint32_t n, const ss__json_keys *k)
{
    ss_buf_reset(b);
    int known = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (self[i] == SS_MISSING)
            continue;
        known = 1;
        if (self[i] == total[i])
            continue;
        add_key(b, k, i);
        ss_buf_json_int(b, self[i]);
    }
    if (b->len)
        ss_buf_add(b, "}", 1);
    else if (known)
        ss_buf_add(b, "{}", 2);
    return b->oom ? -1 : 0;
}
