/*
 * trace_profiles.c - stored torch.profiler traces merged into `stepscope
 * trace` (trace_profiles.h).
 *
 * A Chrome trace file is either {"traceEvents": [...], ...} (torch with
 * Kineto) or a bare array of events (torch's legacy profiler); both are
 * read.  Files are parsed whole (cJSON), one at a time and at most
 * SS_TRACE_PROFILE_MAX_BYTES, so memory follows the largest file, not
 * their number.  Metadata events ("ph":"M") of the profiler are dropped:
 * each group gets its own process and thread names.
 */
#include "trace_profiles.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"
#include "model.h"

#define MAX_THREADS 256 /* (pid, tid) pairs named per profile */

/* Reads PATH whole into a NUL-terminated buffer.  NULL with ERRNO set
 * (EFBIG: over the limit). */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0 ||
        (uint64_t)st.st_size > SS_TRACE_PROFILE_MAX_BYTES) {
        fclose(f);
        errno = EFBIG;
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!buf) {
        errno = ENOMEM;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The value of key K as text ("CPU functions", "1234"), into BUF. */
static const char *id_text(const cJSON *e, const char *k, char *buf,
                           size_t cap)
{
    const cJSON *v = cJSON_GetObjectItem(e, k);
    if (cJSON_IsString(v))
        snprintf(buf, cap, "%s", v->valuestring);
    else if (cJSON_IsNumber(v))
        snprintf(buf, cap, "%.0f", v->valuedouble);
    else
        snprintf(buf, cap, "?");
    return buf;
}

typedef struct {
    char names[MAX_THREADS][96];
    int n;
} thread_map;

/* The tid (1..) of the profiler's pair NAME in M; new ones are added up
 * to MAX_THREADS, the rest share the last. */
static int thread_of(thread_map *m, const char *name, int *added)
{
    *added = 0;
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->names[i], name) == 0)
            return i + 1;
    if (m->n == MAX_THREADS)
        return MAX_THREADS;
    snprintf(m->names[m->n], sizeof m->names[0], "%s", name);
    *added = 1;
    return ++m->n;
}

/* Writes one profile's events; returns 0, or -1 with a reason in WHY. */
static int merge_one(FILE *f, const ss_profile_row *p, int64_t pid,
                     int64_t t0_ns, uint64_t *events, char *why, size_t wlen)
{
    size_t len = 0;
    char *text = read_file(p->path, &len);
    if (!text) {
        if (errno == EFBIG)
            snprintf(why, wlen, "larger than %u MiB: open %s on its own",
                     SS_TRACE_PROFILE_MAX_BYTES >> 20, p->path);
        else
            snprintf(why, wlen, "%s: %s%s%s%s", p->path, strerror(errno),
                     p->host ? " (written on " : "", p->host ? p->host : "",
                     p->host ? ": a trace stays on the node that wrote it)"
                             : "");
        return -1;
    }
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *evs = cJSON_IsArray(doc) ? doc
                       : cJSON_GetObjectItem(doc, "traceEvents");
    if (!cJSON_IsArray(evs)) {
        cJSON_Delete(doc);
        snprintf(why, wlen, "%s is not a Chrome trace", p->path);
        return -1;
    }
    double marker_us = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *name = cJSON_GetObjectItem(e, "name");
        const cJSON *ts = cJSON_GetObjectItem(e, "ts");
        if (cJSON_IsString(name) && cJSON_IsNumber(ts) &&
            strcmp(name->valuestring, "stepscope::clock") == 0) {
            marker_us = ts->valuedouble;
            break;
        }
    }
    if (marker_us < 0 || p->marker_ns == SS_MISSING) {
        cJSON_Delete(doc);
        snprintf(why, wlen, "%s has no stepscope::clock event to align it "
                 "by", p->path);
        return -1;
    }
    /* ts on the trace's clock, in microseconds */
    double shift_us = (double)(p->marker_ns - t0_ns) / 1000.0 - marker_us;
    fprintf(f, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRId64
               ",\"tid\":0,\"args\":{\"name\":\"rank %" PRId64
               " torch.profiler (request %" PRId64 ")\"}}"
               ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%"
               PRId64 ",\"tid\":0,\"args\":{\"sort_index\":%" PRId64 "}}",
            pid, p->rank, p->request_id, pid, pid);
    *events += 2;
    thread_map *m = calloc(1, sizeof *m);
    if (!m) {
        cJSON_Delete(doc);
        snprintf(why, wlen, "out of memory");
        return -1;
    }
    cJSON_ArrayForEach(e, evs) {
        const cJSON *ph = cJSON_GetObjectItem(e, "ph");
        if (!cJSON_IsObject(e) || (cJSON_IsString(ph) &&
                                   strcmp(ph->valuestring, "M") == 0))
            continue;
        char a[40], b[40], pair[96];
        snprintf(pair, sizeof pair, "%s %s", id_text(e, "pid", a, sizeof a),
                 id_text(e, "tid", b, sizeof b));
        int added, tid = thread_of(m, pair, &added);
        if (added) {
            fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%"
                       PRId64 ",\"tid\":%d,\"args\":{\"name\":",
                    pid, tid);
            ss_json_fput_str(f, pair);
            fputs("}}", f);
            ++*events;
        }
        cJSON *item = (cJSON *)e;
        cJSON_DeleteItemFromObject(item, "pid");
        cJSON_DeleteItemFromObject(item, "tid");
        cJSON_AddNumberToObject(item, "pid", (double)pid);
        cJSON_AddNumberToObject(item, "tid", tid);
        cJSON *ts = cJSON_GetObjectItem(item, "ts");
        if (cJSON_IsNumber(ts))
            cJSON_SetNumberValue(ts, ts->valuedouble + shift_us);
        char *out = cJSON_PrintUnformatted(item);
        if (out) {
            fputs(",\n", f);
            fputs(out, f);
            ++*events;
            cJSON_free(out);
        }
    }
    free(m);
    cJSON_Delete(doc);
    return 0;
}

int ss_trace_profiles_write(ss_reader *rd, FILE *f, int64_t run_id,
                            int64_t attempt, const uint8_t *want_rank,
                            int64_t world, int64_t t0_ns, int64_t pid_base,
                            uint64_t *events, FILE *err)
{
    ss_profile_row *rows;
    size_t n;
    if (ss_reader_profiles(rd, run_id, attempt, 0, &rows, &n) != 0) {
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
        return -1;
    }
    int merged = 0;
    for (size_t i = 0; i < n; i++) {
        const ss_profile_row *p = &rows[i];
        if (!p->status || strcmp(p->status, "done") != 0 || !p->path ||
            p->rank < 0 || p->rank >= world || !want_rank[p->rank])
            continue;
        char why[600];
        if (merge_one(f, p, pid_base + (int64_t)i, t0_ns, events, why,
                      sizeof why) == 0)
            merged++;
        else
            fprintf(err, "stepscope trace: the profile of rank %" PRId64
                    " (request %" PRId64 ") is left out: %s\n", p->rank,
                    p->request_id, why);
    }
    ss_profile_rows_free(rows, n);
    return merged;
}
