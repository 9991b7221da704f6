/*
 * detect_rl.h - what the reinforcement-learning detector (detect_rl.c)
 * tells the others: whether a rank's lateness is its rollouts' long tail.
 * The straggler detector asks it for the words of its finding.  Internal
 * to the analysis stage.
 */
#ifndef STEPSCOPE_DETECT_RL_H
#define STEPSCOPE_DETECT_RL_H

#include <stddef.h>
#include <stdint.h>

#include "detectors.h"

/*
 * Appends to BUF (LEN bytes, holding a string) the clause "; its rollouts
 * set the pace: its longest completion reached 512 tokens (the other
 * ranks' longest: 9)" when rank R had a rollout_long_tail step between
 * FIRST and LAST (steps, inclusive); leaves BUF as it is otherwise, or
 * when the whole clause would not fit.
 */
void ss__rl_straggler_words(const ss_detectors *d, uint32_t r,
                            uint64_t first, uint64_t last, char *buf,
                            size_t len);

#endif
