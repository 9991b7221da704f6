/*
 * pipeline_bubble.h - the arithmetic of pipeline bubbles, shared by the
 * pipeline detector (analysis/detect_pipeline.c) and `stepscope trace`
 * (views/trace_pipeline.c), so that both say the same numbers.
 *
 * A rank's pipeline.spans vector holds 4 doubles per microbatch span:
 * [index, kind (SS_PIPE_F, _B, _W), begin, end], times in ns after the
 * rank's step begin (src/lib/pipeline.c); pipeline.config holds [stage,
 * stages, schedule, microbatches, chunks, dropped spans].
 */
#ifndef STEPSCOPE_PIPELINE_BUBBLE_H
#define STEPSCOPE_PIPELINE_BUBBLE_H

#include <stdint.h>

enum { SS_PIPE_F = 1, SS_PIPE_B = 2, SS_PIPE_W = 3 };
enum { SS_PIPE_CONFIG_LEN = 6, SS_PIPE_SPAN_LEN = 4 };
#define SS_PIPE_SPANS_MAX 256 /* spans of one rank-step (the recorder's) */

/* "gpipe", "1f1b", "interleaved", "zb1p", "dualpipe" for codes 1..5, "?"
 * for any other. */
const char *ss_pipe_schedule_name(int code);

/* The bubble per step, in ms, of schedule CODE over STAGES stages whose
 * mean forward, backward (its input-gradient part where W is split off)
 * and weight-gradient spans are F_MS, B_MS and W_MS (B_full = B + W):
 * gpipe, 1f1b and interleaved (p-1)(F + B_full), zb1p (p-1)(F + B_full -
 * 2W), dualpipe (p/2-1)(F&B + B_full - 3W) with F&B taken as F + B_full.
 * Never negative; NaN for an unknown code. */
double ss_pipe_formula_ms(int code, int stages, double f_ms, double b_ms,
                          double w_ms);

/* What one rank's spans say. */
typedef struct {
    double busy_ns;          /* the union of its spans */
    double first_ns, last_ns;/* its first begin, its last end (ns after
                                its step begin) */
    double sum_ns[4];        /* by kind (1..3): summed span time */
    double count[4];         /* by kind: spans */
} ss_pipe_rank;

/* Reads the N doubles of a pipeline.spans vector V (at most
 * SS_PIPE_SPANS_MAX whole spans; bad ones are skipped) into *OUT, using
 * SCRATCH (2 * SS_PIPE_SPANS_MAX doubles).  Returns the spans read, 0 when
 * none. */
uint32_t ss_pipe_rank_read(const double *v, uint32_t n, double *scratch,
                           ss_pipe_rank *out);

#endif
