/*
 * objects.c - the step and finding objects of the API (objects.h).
 *
 * The documents of query.c and the event stream of live.c both write their
 * steps and findings through these functions; that is what makes an event
 * the same bytes as the stored object a client fetches later.  Only json.h
 * and model.h are used, so neither caller depends on the other.
 */
#include "objects.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a step ---- */

/* The members of a statistics object, without its braces. */
static void stat_members(ss_buf *out, int64_t min_ns, int64_t median_ns,
                         int64_t p90_ns, int64_t max_ns, int64_t worst_rank)
{
    ss_buf_puts(out, "\"min\":");
    ss_buf_json_ms(out, min_ns);
    ss_buf_puts(out, ",\"median\":");
    ss_buf_json_ms(out, median_ns);
    ss_buf_puts(out, ",\"p90\":");
    ss_buf_json_ms(out, p90_ns);
    ss_buf_puts(out, ",\"max\":");
    ss_buf_json_ms(out, max_ns);
    ss_buf_puts(out, ",\"worst_rank\":");
    ss_buf_json_int(out, worst_rank);
}

void ss_obj_stat(ss_buf *out, int64_t min_ns, int64_t median_ns,
                 int64_t p90_ns, int64_t max_ns, int64_t worst_rank)
{
    ss_buf_puts(out, "{");
    stat_members(out, min_ns, median_ns, p90_ns, max_ns, worst_rank);
    ss_buf_puts(out, "}");
}

void ss_obj_phase(ss_buf *out, const char *name, const int64_t incl[5],
                  int64_t self_n, const int64_t self[5])
{
    ss_buf_json_str(out, name);
    ss_buf_puts(out, ":{");
    stat_members(out, incl[0], incl[1], incl[2], incl[3], incl[4]);
    ss_buf_puts(out, ",\"self\":");
    if (self_n > 0) {
        ss_buf_puts(out, "{\"median\":");
        ss_buf_json_ms(out, self[1]);
        ss_buf_puts(out, ",\"max\":");
        ss_buf_json_ms(out, self[3]);
        ss_buf_puts(out, ",\"worst_rank\":");
        ss_buf_json_int(out, self[4]);
        ss_buf_puts(out, "}");
    } else {
        ss_buf_puts(out, "null");
    }
    ss_buf_puts(out, "}");
}

void ss_obj_sync(ss_buf *out, const char *name, int64_t skew_ns,
                 int64_t late_ns, int64_t worst_rank)
{
    ss_buf_json_str(out, name);
    ss_buf_puts(out, ":{\"skew_ms\":");
    ss_buf_json_ms(out, skew_ns);
    ss_buf_puts(out, ",\"late_ms\":");
    ss_buf_json_ms(out, late_ns);
    ss_buf_puts(out, ",\"worst_rank\":");
    ss_buf_json_int(out, worst_rank);
    ss_buf_puts(out, "}");
}

void ss_obj_mem(ss_buf *out, const char *key, int64_t median, int64_t max,
                int64_t worst_rank)
{
    ss_buf_puts(out, ",");
    ss_buf_json_str(out, key);
    ss_buf_puts(out, ":{\"median\":");
    ss_buf_json_int(out, median);
    ss_buf_puts(out, ",\"max\":");
    ss_buf_json_int(out, max);
    ss_buf_puts(out, ",\"worst_rank\":");
    ss_buf_json_int(out, worst_rank);
    ss_buf_puts(out, "}");
}

/* The model marks "no worst rank" with a negative rank; JSON says null. */
static int64_t worst_or_missing(int32_t rank)
{
    return rank < 0 ? SS_MISSING : rank;
}

static int cmp_name_idx(const void *a, const void *b, void *arg)
{
    const char *const *names = arg;
    return strcmp(names[*(const uint32_t *)a], names[*(const uint32_t *)b]);
}

static const char *name_at(const char *const *names, int idx)
{
    return names && idx >= 0 && names[idx] ? names[idx] : "?";
}

void ss_obj_step(ss_buf *out, const ss_step_view *v, const char *const *names)
{
    ss_buf_printf(out, "{\"step\":%" PRIu64 ",\"n_present\":%" PRIu32
                  ",\"missing_ranks\":[", v->step, v->n_present);
    for (uint32_t i = 0; i < v->n_missing; i++)
        ss_buf_printf(out, i ? ",%" PRIu32 : "%" PRIu32, v->missing_ranks[i]);
    ss_buf_puts(out, "],\"step_ms\":");
    const ss_stat *s = &v->step_time;
    ss_obj_stat(out, s->min, s->median, s->p90, s->max,
                worst_or_missing(s->worst_rank));

    /* Phases and syncs by name, as the store's keys order them. */
    uint32_t n = v->n_phases > v->n_syncs ? v->n_phases : v->n_syncs;
    uint32_t idx_small[64];
    uint32_t *idx = n <= 64 ? idx_small : malloc(n * sizeof *idx);
    const char *name_small[64];
    const char **name = n <= 64 ? name_small : malloc(n * sizeof *name);
    if (!idx || !name) {
        if (idx != idx_small)
            free(idx);
        if (name != name_small)
            free(name);
        out->oom = 1;
        return;
    }
    for (int pass = 0; pass < 2; pass++) {
        uint32_t m = pass == 0 ? v->n_phases : v->n_syncs;
        for (uint32_t i = 0; i < m; i++) {
            idx[i] = i;
            name[i] = name_at(names, pass == 0 ? v->phases[i].name
                                               : v->syncs[i].name);
        }
        qsort_r(idx, m, sizeof *idx, cmp_name_idx, (void *)name);
        ss_buf_puts(out, pass == 0 ? ",\"phases\":{" : ",\"syncs\":{");
        for (uint32_t k = 0; k < m; k++) {
            uint32_t i = idx[k];
            if (k)
                ss_buf_puts(out, ",");
            if (pass == 0) {
                const ss_stat *p = &v->phases[i].stat;
                const ss_stat *q = v->phase_self ? &v->phase_self[i] : NULL;
                int64_t incl[5] = {p->min, p->median, p->p90, p->max,
                                   worst_or_missing(p->worst_rank)};
                int64_t self[5] = {SS_MISSING, SS_MISSING, SS_MISSING,
                                   SS_MISSING, SS_MISSING};
                if (q) {
                    self[0] = q->min;
                    self[1] = q->median;
                    self[2] = q->p90;
                    self[3] = q->max;
                    self[4] = worst_or_missing(q->worst_rank);
                }
                ss_obj_phase(out, name[i], incl, q ? q->n : 0, self);
            } else {
                const ss_sync_stat *y = &v->syncs[i];
                ss_obj_sync(out, name[i], y->skew_ns, y->late_ns,
                            worst_or_missing(y->worst_rank));
            }
        }
        ss_buf_puts(out, "}");
    }
    if (idx != idx_small)
        free(idx);
    if (name != name_small)
        free(name);
    ss_obj_mem(out, "rss_bytes", v->rss.median, v->rss.max,
               worst_or_missing(v->rss.worst_rank));
    ss_obj_mem(out, "device_bytes", v->device.median, v->device.max,
               worst_or_missing(v->device.worst_rank));
    ss_buf_puts(out, "}");
}

/* ---- a finding ---- */

void ss_obj_finding_stored(ss_buf *out, const ss_obj_finding_fields *f)
{
    ss_buf_printf(out, "{\"id\":%" PRId64 ",\"kind\":", f->id);
    ss_buf_json_str(out, f->kind);
    ss_buf_puts(out, ",\"severity\":");
    ss_buf_json_str(out, f->severity);
    ss_buf_puts(out, ",\"ranks\":[");
    for (size_t i = 0; i < f->n_ranks; i++) {
        if (i)
            ss_buf_puts(out, ",");
        ss_buf_json_int(out, f->ranks[i]);
    }
    ss_buf_puts(out, "],\"phase\":");
    ss_buf_json_str(out, f->phase);
    ss_buf_puts(out, ",\"first_step\":");
    ss_buf_json_int(out, f->first_step);
    ss_buf_puts(out, ",\"last_step\":");
    ss_buf_json_int(out, f->last_step);
    ss_buf_puts(out, ",\"evidence\":");
    ss_buf_puts(out, f->evidence ? f->evidence : "{}");
    ss_buf_puts(out, ",\"message\":");
    ss_buf_json_str(out, f->message);
    ss_buf_puts(out, "}");
}

/* The text of the N-byte field SRC into DST (N bytes, NUL-terminated): at
 * most N - 1 bytes, and no byte past the field when it lacks its NUL. */
static void copy_field(char *dst, const char *src, size_t n)
{
    size_t len = strnlen(src, n - 1);
    memcpy(dst, src, len);
    dst[len] = '\0';
}

void ss_obj_finding(ss_buf *out, const ss_finding *f)
{
    int64_t ranks[SS_FINDING_MAX_RANKS];
    size_t n_ranks = 0;
    for (; n_ranks < f->n_ranks && n_ranks < SS_FINDING_MAX_RANKS; n_ranks++)
        ranks[n_ranks] = f->ranks[n_ranks];
    /* The fixed-size text fields may lack their NUL in a damaged finding:
     * copies bound every read.  The detectors write a compact evidence
     * object (what the store keeps verbatim); anything else would not be
     * one. */
    char kind[sizeof f->kind], phase[sizeof f->phase];
    char evidence[sizeof f->evidence_json], message[sizeof f->message];
    copy_field(kind, f->kind, sizeof f->kind);
    copy_field(phase, f->phase, sizeof f->phase);
    copy_field(evidence, f->evidence_json, sizeof f->evidence_json);
    copy_field(message, f->message, sizeof f->message);
    size_t n = strlen(evidence);
    int is_object = n >= 2 && evidence[0] == '{' && evidence[n - 1] == '}';
    ss_obj_finding_fields fields = {
        .id = f->id,
        .kind = kind,
        .severity = f->severity == SS_CRITICAL ? "critical" : "warning",
        .ranks = ranks,
        .n_ranks = n_ranks,
        .phase = phase[0] ? phase : NULL,
        .first_step = (int64_t)f->first_step,
        .last_step = (int64_t)f->last_step,
        .evidence = is_object ? evidence : "{}",
        .message = message,
    };
    ss_obj_finding_stored(out, &fields);
}
