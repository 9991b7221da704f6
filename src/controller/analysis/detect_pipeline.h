/*
 * detect_pipeline.h - the pipeline detector's bubble formula
 * (detect_pipeline.c), for its unit test and the docs' numbers.
 */
#ifndef STEPSCOPE_DETECT_PIPELINE_H
#define STEPSCOPE_DETECT_PIPELINE_H

/* The bubble per step, in ms, of a SCHEDULE (the ss_pipe_schedule code:
 * 1 gpipe, 2 1f1b, 3 interleaved, 4 zb1p, 5 dualpipe) over STAGES stages
 * whose mean forward, backward (input-gradient part where W is split off)
 * and weight-gradient spans are F_MS, B_MS and W_MS; never negative.  NaN
 * for an unknown schedule. */
double ss__pipeline_formula_ms(int schedule, int stages, double f_ms,
                               double b_ms, double w_ms);

#endif
