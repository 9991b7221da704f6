/*
 * goodput_out.h - goodput and reliability (goodput.h) rendered: the
 * "goodput" and "reliability" JSON objects (docs/report-json.md) and the
 * Prometheus lines of /metrics (docs/api.md).
 */
#ifndef STEPSCOPE_GOODPUT_OUT_H
#define STEPSCOPE_GOODPUT_OUT_H

#include "goodput.h"
#include "json.h"

/* Appends the "goodput" object: run, running, wall_ms, goodput, ms (one
 * field per category, adding up to wall_ms) and attempts. */
void ss_goodput_json(ss_buf *b, const ss_goodput *g);

/* Appends the "reliability" object (MTBF, MTTR, Young/Daly). */
void ss_reliability_json(ss_buf *b, const ss_reliability *rel);

/* Appends stepscope_goodput_ratio, stepscope_goodput_seconds{category}
 * and stepscope_attempts with their HELP and TYPE lines. */
void ss_goodput_metrics(ss_buf *b, const ss_goodput *g);

#endif
