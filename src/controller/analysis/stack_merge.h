/*
 * stack_merge.h - ranks grouped by identical stacks, like LLNL's STAT
 * (docs/debug.md).
 *
 * Each rank is represented by one call path (its main thread's Python
 * frames, outermost first) or, when it gave none, by its state and why
 * ("stopped (SIGSTOP): no Python stack").  Ranks with the same path form a
 * group; the groups are ordered fewest ranks first, so the outlier is the
 * first thing a person reads:
 *
 *   rank 2 (1): <module> → train → load_batch: time.sleep(3600)
 *   ranks 0-1,3 (3): <module> → train → … → all_reduce
 *   ranks 0-4095 except 17, 900, 3001 (4093): <module> → … → all_reduce
 *
 * and the paths also form a prefix tree whose nodes carry the set of ranks
 * that pass through them (JSON).  Pure: no I/O, no clock.
 */
#ifndef STEPSCOPE_STACK_MERGE_H
#define STEPSCOPE_STACK_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define SS_STACK_MERGE_SHOWN 8  /* path elements shown before eliding */

/* One rank's representative stack.  All pointers are borrowed. */
typedef struct {
    uint32_t rank;
    const char *state;        /* "ok", "no_answer", "stopped", "exited" */
    const char *why;          /* NULL when ok */
    const char *const *funcs; /* call path, outermost first; NULL if none */
    size_t depth;
    const char *leaf_code;    /* the innermost frame's source line, or NULL */
    uint32_t other_threads;   /* threads besides the representative one */
} ss_stack_rank_in;

/*
 * Appends "0-3,7"-style text for the N ranks in RANKS (any order, copied
 * and sorted; duplicates kept once) to OUT.
 */
void ss_stack_rankset(const uint32_t *ranks, size_t n, ss_buf *out);

/*
 * The same set for a person: "0-4095 except 17, 900, 3001" when that is
 * shorter than ss_stack_rankset's text and leaves out at most
 * SS_STACK_MERGE_EXCEPT ranks between the lowest and the highest; else
 * ss_stack_rankset's text.
 */
#define SS_STACK_MERGE_EXCEPT 8
void ss_stack_rankset_text(const uint32_t *ranks, size_t n, ss_buf *out);

/*
 * Appends the merged text (one line per group, fewest ranks first, ties by
 * the lowest rank; each line ends with '\n') to TEXT and the JSON object
 * {"groups":[{"ranks":"0-3","count":N,"state":"ok","path":[...],
 * "code":"…"|null,"why":…}],"tree":{"func":null,"ranks":"…",
 * "children":[…]}} to JSON (either may be NULL).  Returns the number of
 * groups, or -1 when memory ran out.
 */
int ss_stack_merge(const ss_stack_rank_in *ranks, size_t n, ss_buf *text,
                   ss_buf *json);

#endif
