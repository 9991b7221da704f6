/*
 * findings_capture.h - what the detectors emit, kept for a unit test.
 *
 * The detector tests drive an ss_detectors with synthetic finalized steps
 * and look at the findings it emits.  make() creates detectors with the
 * default configuration whose sink keeps the latest version of each
 * finding by id (updates reuse an id) and counts every emission;
 * count_kind, first_kind, dump and the flat-JSON helpers read them.
 * Header-only, like testing.h; test support, never linked into a product.
 */
#ifndef STEPSCOPE_FINDINGS_CAPTURE_H
#define STEPSCOPE_FINDINGS_CAPTURE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detectors.h"

#define MAX_FOUND 64

typedef struct {
    ss_finding last[MAX_FOUND]; /* by id - 1 */
    uint32_t n_ids, emissions;
} found;

static inline void on_finding(void *ctx, const ss_finding *f)
{
    found *fd = ctx;
    fd->emissions++;
    if (f->id >= 1 && f->id <= MAX_FOUND) {
        fd->last[f->id - 1] = *f;
        if (f->id > fd->n_ids)
            fd->n_ids = f->id;
    }
}

/* Detectors for WORLD ranks with the default configuration, capturing
 * into FD (cleared); NULL when out of memory. */
static inline ss_detectors *make(uint32_t world, found *fd)
{
    memset(fd, 0, sizeof *fd);
    ss_detector_config cfg;
    ss_detector_config_defaults(&cfg);
    ss_sink sink = {fd, NULL, on_finding};
    return ss_detectors_create(&cfg, world, 0, &sink);
}

static inline uint32_t count_kind(const found *fd, const char *kind)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < fd->n_ids; i++)
        n += strcmp(fd->last[i].kind, kind) == 0;
    return n;
}

static inline const ss_finding *first_kind(const found *fd, const char *kind)
{
    for (uint32_t i = 0; i < fd->n_ids; i++)
        if (strcmp(fd->last[i].kind, kind) == 0)
            return &fd->last[i];
    return NULL;
}

/* Every finding kept, on stderr: for a failing test's log. */
static inline void dump(const found *fd)
{
    for (uint32_t i = 0; i < fd->n_ids; i++)
        fprintf(stderr, "    [%u] %s: %s %s\n", fd->last[i].id,
                fd->last[i].kind, fd->last[i].message,
                fd->last[i].evidence_json);
}

/* The number under KEY in a flat JSON object, NaN when absent. */
static inline double json_get(const char *json, const char *key)
{
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

/* Whether a flat JSON object has the string VALUE under KEY. */
static inline int json_has(const char *json, const char *key,
                           const char *value)
{
    char pat[160];
    snprintf(pat, sizeof pat, "\"%s\":\"%s\"", key, value);
    return strstr(json, pat) != NULL;
}

#endif
