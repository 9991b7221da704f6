/*
 * pipeline.h - the recorder's pipeline microbatches (pipeline.c) as the
 * step calls of recorder.c see them.
 */
#ifndef STEPSCOPE_LIB_PIPELINE_H
#define STEPSCOPE_LIB_PIPELINE_H

#include "clock.h"

/* The calling thread begins a step at T (recorder clock): its
 * microbatch spans are measured from T until the next one.  Called by
 * ss_step_begin on the training thread, after any open step was ended. */
void ss__pipeline_step_begin(ss__mono_ns t);

/* The calling thread is about to end the open step: its buffered spans
 * and the pipeline's shape go out as the step's vectors (ss_values).
 * Called by ss_step_begin / ss_step_end while the step is still open. */
void ss__pipeline_step_flush(void);

#endif
