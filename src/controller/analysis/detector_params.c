/*
 * detector_params.c - the detectors' tunables as a table, their defaults,
 * and `--set NAME=VALUE` (detectors.h, detector_params.h).
 *
 * The rows live in detector_params.h (SS_DETECTOR_PARAMS); this file makes
 * the public table ss_detector_params[] and the bounds from them, parses a
 * value strictly (the whole string a finite number inside the bounds), and
 * resolves a configuration into the values the detectors run with.
 */
#include "detector_params.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const ss_detector_param ss_detector_params[] = {
#define X(id, name, def, unit, lo, hi, doc) {name, def, unit, doc},
    SS_DETECTOR_PARAMS(X)
#undef X
    {NULL, 0, NULL, NULL}};

static const double param_min[P_COUNT] = {
#define X(id, name, def, unit, lo, hi, doc) lo,
    SS_DETECTOR_PARAMS(X)
#undef X
};

static const double param_max[P_COUNT] = {
#define X(id, name, def, unit, lo, hi, doc) hi,
    SS_DETECTOR_PARAMS(X)
#undef X
};

void ss_detector_config_defaults(ss_detector_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < P_COUNT; i++)
        cfg->values[i] = ss_detector_params[i].default_value;
}

int ss_detector_config_set(ss_detector_config *cfg, const char *name,
                           const char *value, char *err, size_t errlen)
{
    for (int i = 0; i < P_COUNT; i++) {
        if (strcmp(ss_detector_params[i].name, name) != 0)
            continue;
        char *end;
        errno = 0;
        double v = value ? strtod(value, &end) : 0;
        if (!value || end == value || *end || errno || !isfinite(v)) {
            snprintf(err, errlen, "%s: '%s' is not a number", name,
                     value ? value : "");
            return -1;
        }
        if (v < param_min[i] || v > param_max[i]) {
            snprintf(err, errlen, "%s: %g is outside [%g, %g] %s", name, v,
                     param_min[i], param_max[i], ss_detector_params[i].unit);
            return -1;
        }
        cfg->values[i] = v;
        return 0;
    }
    snprintf(err, errlen, "unknown detector setting '%s'", name ? name : "");
    return -1;
}

void ss__detector_params_resolve(const ss_detector_config *cfg,
                                 double p[P_COUNT])
{
    ss_detector_config defaults;
    if (!cfg) {
        ss_detector_config_defaults(&defaults);
        cfg = &defaults;
    }
    for (int i = 0; i < P_COUNT; i++) {
        double v = cfg->values[i];
        if (!isfinite(v))
            v = ss_detector_params[i].default_value;
        p[i] = v < param_min[i] ? param_min[i]
               : v > param_max[i] ? param_max[i]
                                  : v;
    }
    if (p[P_S_MIN_STEPS] > p[P_S_WINDOW])
        p[P_S_MIN_STEPS] = p[P_S_WINDOW];
    if (p[P_S_TRANSIENT] > p[P_S_WINDOW])
        p[P_S_TRANSIENT] = p[P_S_WINDOW];
    if (p[P_H_MIN_STEPS] > p[P_H_WINDOW])
        p[P_H_MIN_STEPS] = p[P_H_WINDOW];
    if (p[P_H_MIN_EVENTS] > p[P_H_WINDOW])
        p[P_H_MIN_EVENTS] = p[P_H_WINDOW];
    if (p[P_J_MIN_STEPS] > p[P_J_WINDOW])
        p[P_J_MIN_STEPS] = p[P_J_WINDOW];
    if (p[P_SP_MIN_SAMPLES] > p[P_SP_WINDOW])
        p[P_SP_MIN_SAMPLES] = p[P_SP_WINDOW];
}
