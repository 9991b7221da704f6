/*
 * detector_config.h - the detectors' settings as the rest of the controller
 * sees them: a configuration of every tunable, the table of tunables (name,
 * default, unit, meaning) and setting one by name (`stepscope run --set
 * NAME=VALUE`).  The rows themselves are detector_params.h, internal to the
 * analysis stage; detector_params.c implements this header.  Its own
 * header, included by detectors.h and detector_params.h alike, so that the
 * driver and the tunables do not include each other.
 */
#ifndef STEPSCOPE_DETECTOR_CONFIG_H
#define STEPSCOPE_DETECTOR_CONFIG_H

#include <stddef.h>

typedef struct {
    /* by ss_detector_params[] index: names, defaults and docs are the
     * rows of detector_params.h */
    double values[128];
} ss_detector_config;

/* One tunable: NAME (dotted, "jitter.mad_k"), default and meaning. */
typedef struct {
    const char *name;
    double default_value;
    const char *unit;
    const char *doc;
} ss_detector_param;

/* The table of tunables, terminated by an entry with NAME == NULL. */
extern const ss_detector_param ss_detector_params[];

/* Fills CFG with every tunable's default. */
void ss_detector_config_defaults(ss_detector_config *cfg);

/* Sets the tunable NAME from the decimal string VALUE.  Returns 0, or -1
 * with a reason in ERR for an unknown name or a bad number. */
int ss_detector_config_set(ss_detector_config *cfg, const char *name,
                           const char *value, char *err, size_t errlen);

#endif
