/*
 * recent_rows.c - every rank's latest steps (recent_rows.h).
 */
#include "recent_rows.h"

#include <stdlib.h>
#include <string.h>

#include "fnv1a.h"
#include "model.h"

#define NAME_SLOTS (2 * SS_RECENT_NAMES) /* open addressing, a power of 2 */

typedef struct {
    uint64_t step;
    uint32_t attempt;
    uint8_t n_phases;
    uint8_t phases_dropped; /* saturates at 255 */
    int64_t step_ns;
    int64_t rss_bytes, device_bytes;
    uint16_t name[SS_RECENT_PHASES];
    int64_t dur_ns[SS_RECENT_PHASES];
} recent_row;

typedef struct {
    uint64_t recorded; /* rows ever added; the next goes at recorded % N */
    recent_row row[SS_RECENT_STEPS];
} rank_ring;

struct ss_recent_rows {
    uint32_t first_rank, nranks;
    uint64_t lost;
    uint32_t n_names;
    char *names[SS_RECENT_NAMES];
    uint16_t slots[NAME_SLOTS]; /* name index + 1; 0: empty */
    rank_ring *ring[];          /* one per rank, NULL until its first row */
};

ss_recent_rows *ss_recent_rows_new(uint32_t first_rank, uint32_t nranks)
{
    if (nranks == 0)
        return NULL;
    ss_recent_rows *r = calloc(1, sizeof *r + (size_t)nranks * sizeof(rank_ring *));
    if (r) {
        r->first_rank = first_rank;
        r->nranks = nranks;
    }
    return r;
}

int ss_recent_rows_holds(const ss_recent_rows *r, uint32_t rank)
{
    return r && rank >= r->first_rank && rank - r->first_rank < r->nranks;
}

/* NAME's index in the table, added if new; -1 when the table is full. */
static int intern(ss_recent_rows *r, const char *name)
{
    size_t len = strlen(name);
    if (len > SS_RECENT_NAME_MAX)
        len = SS_RECENT_NAME_MAX;
    size_t k = (size_t)ss_fnv1a(SS_FNV1A_BASIS, name, len) & (NAME_SLOTS - 1);
    for (;; k = (k + 1) & (NAME_SLOTS - 1)) {
        uint16_t s = r->slots[k];
        if (s == 0)
            break;
        const char *have = r->names[s - 1];
        if (strncmp(have, name, len) == 0 && have[len] == '\0')
            return s - 1;
    }
    if (r->n_names == SS_RECENT_NAMES)
        return -1;
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, name, len);
    copy[len] = '\0';
    r->names[r->n_names] = copy;
    r->slots[k] = (uint16_t)(r->n_names + 1);
    return (int)r->n_names++;
}

void ss_recent_rows_add(ss_recent_rows *r, uint32_t rank, uint32_t attempt,
                        uint64_t step, int64_t begin_ns, int64_t end_ns,
                        int64_t rss_bytes, int64_t device_bytes, uint32_t n,
                        const char *const *names, const int64_t *durs)
{
    if (!r)
        return;
    if (!ss_recent_rows_holds(r, rank)) {
        r->lost++;
        return;
    }
    rank_ring **slot = &r->ring[rank - r->first_rank];
    if (!*slot && !(*slot = calloc(1, sizeof **slot))) {
        r->lost++;
        return;
    }
    rank_ring *g = *slot;
    recent_row *w = &g->row[g->recorded % SS_RECENT_STEPS];
    *w = (recent_row){.step = step, .attempt = attempt,
                      .step_ns = end_ns >= begin_ns ? end_ns - begin_ns : 0,
                      .rss_bytes = rss_bytes, .device_bytes = device_bytes};
    unsigned dropped = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!names[i])
            continue;
        int id = intern(r, names[i]);
        uint8_t j = 0;
        while (id >= 0 && j < w->n_phases && w->name[j] != (uint16_t)id)
            j++;
        if (id >= 0 && j < w->n_phases) {
            w->dur_ns[j] += durs[i];
        } else if (id >= 0 && w->n_phases < SS_RECENT_PHASES) {
            w->name[w->n_phases] = (uint16_t)id;
            w->dur_ns[w->n_phases++] = durs[i];
        } else {
            dropped++;
        }
    }
    w->phases_dropped = dropped > 255 ? 255 : (uint8_t)dropped;
    g->recorded++;
}

uint64_t ss_recent_rows_lost(const ss_recent_rows *r)
{
    return r ? r->lost : 0;
}

int ss_recent_rows_json(const ss_recent_rows *r, uint32_t rank,
                        uint32_t steps, ss_buf *out)
{
    if (!ss_recent_rows_holds(r, rank))
        return -1;
    const rank_ring *g = r->ring[rank - r->first_rank];
    uint64_t recorded = g ? g->recorded : 0;
    uint64_t kept = recorded < SS_RECENT_STEPS ? recorded : SS_RECENT_STEPS;
    if (kept > steps)
        kept = steps;
    ss_buf_printf(out, "{\"rank\":%u,\"kept\":%llu,\"recorded\":%llu,"
                  "\"capacity\":%u,\"rows\":[", rank, (unsigned long long)kept,
                  (unsigned long long)recorded, (unsigned)SS_RECENT_STEPS);
    for (uint64_t k = recorded - kept; k < recorded; k++) {
        const recent_row *w = &g->row[k % SS_RECENT_STEPS];
        ss_buf_printf(out, "%s{\"attempt\":%u,\"step\":%llu,\"step_ms\":",
                      k > recorded - kept ? "," : "", w->attempt,
                      (unsigned long long)w->step);
        ss_buf_json_ms(out, w->step_ns);
        ss_buf_puts(out, ",\"rss_bytes\":");
        ss_buf_json_int(out, w->rss_bytes);
        ss_buf_puts(out, ",\"device_bytes\":");
        ss_buf_json_int(out, w->device_bytes);
        ss_buf_puts(out, ",\"phases\":{");
        for (uint8_t j = 0; j < w->n_phases; j++) {
            if (j)
                ss_buf_puts(out, ",");
            ss_buf_json_str(out, r->names[w->name[j]]);
            ss_buf_puts(out, ":");
            ss_buf_json_ms(out, w->dur_ns[j]);
        }
        ss_buf_printf(out, "},\"phases_dropped\":%u}",
                      (unsigned)w->phases_dropped);
    }
    ss_buf_puts(out, "]}");
    return 0;
}

void ss_recent_rows_free(ss_recent_rows *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->n_names; i++)
        free(r->names[i]);
    for (uint32_t i = 0; i < r->nranks; i++)
        free(r->ring[i]);
    free(r);
}
