/*
 * stack_doc.h - the stacks document: every rank's answer (stack_collect.h)
 * and their merge (analysis/stack_merge.h) in one JSON object, what
 * `GET /api/runs/{id}/stacks` returns and `stepscope stacks` prints
 * (docs/debug.md):
 *
 *   {"run_id":N,"attempt":A,"taken_at":"…","trigger":"request"|"hang",
 *    "native":bool,"elapsed_ms":X,"answered":K,"ranks_total":N,
 *    "merged_text":"rank 2 (1): …\n…",
 *    "other_threads_text":"  ranks 0-7 (8 threads): _bootstrap → …\n…",
 *    "merged":{"tree":…,"groups":[…]},
 *    "ranks":[<one object per rank, as collected>]}
 *
 * other_threads_text has a line per distinct call path of the threads
 * besides each rank's main one, in rank order: "  rank R thread ID: path"
 * for a path one thread has, "  ranks SET (N threads): path" for more.
 */
#ifndef STEPSCOPE_STACK_DOC_H
#define STEPSCOPE_STACK_DOC_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "model.h"

typedef struct {
    int64_t run_id;
    uint32_t attempt;
    ss_wall_ns taken_at;
    const char *trigger;   /* "request" or "hang" */
    int native;
    double elapsed_ms;
} ss_stack_doc_info;

/*
 * Appends the document for the N per-rank objects RANKS to OUT.  Each
 * rank is represented in the merge by its last thread (the oldest: the
 * main thread); a rank object that is not one JSON object counts as
 * "no_answer".  *RANKS_AT (when not NULL) is set to the offset in OUT of
 * the ',"ranks":[' member, the last: the document up to there plus "}" is
 * the document without its ranks' objects.  Returns 0, or -1 when memory
 * ran out (OUT then holds no complete document).
 */
int ss_stack_doc(const ss_stack_doc_info *info, const char *const *ranks,
                 size_t n, ss_buf *out, size_t *ranks_at);

#endif
