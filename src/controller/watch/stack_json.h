/*
 * stack_json.h - a strict reader of the JSON that ranks' stacks travel in
 * (stack_collect.h's per-rank objects), without a tree and without an
 * allocation per value: thousands of ranks' objects, megabytes in all,
 * are checked and read on the controller's loop at every stacks request
 * (docs/performance.md, "Every rank's stacks").
 *
 * ss_sj_value checks one value by RFC 8259's grammar (strings and their
 * escapes, control characters refused, numbers, the three literals,
 * nesting at most SS_SJ_MAX_DEPTH); the walks go over the members of an
 * object or the elements of an array that was checked, lazily: a value
 * is a span of bytes, or entered; ss_sj_str decodes a string's span.  Pure: no I/O, no
 * global state; the bytes are never written.
 */
#ifndef STEPSCOPE_STACK_JSON_H
#define STEPSCOPE_STACK_JSON_H

#include <stddef.h>
#include <stdint.h>

#define SS_SJ_MAX_DEPTH 64

/* The bytes [P, END) of one value (or of a member's key, quotes
 * included). */
typedef struct {
    const char *p, *end;
} ss_sj_span;

/* Where the value that begins at P (white space before it skipped) ends,
 * within END; NULL when the bytes there are not one valid JSON value. */
const char *ss_sj_value(const char *p, const char *end);

/* 1 when the LEN bytes of TEXT are exactly one JSON value (white space
 * around it allowed) that is an object whose member "rank" is the number
 * RANK; else 0. */
int ss_sj_is_rank_object(const char *text, size_t len, uint32_t rank);

/* A walk over the members of an object or the elements of an array that
 * ss_sj_value accepted (over other bytes it yields what it can make of
 * them, never reading past END). */
typedef struct {
    const char *p, *end;
    int first;
} ss_sj_iter;

/* Starts a walk over the object V; 0, or -1 when V is not an object. */
int ss_sj_object(ss_sj_span v, ss_sj_iter *it);

/*
 * The walk is lazy, so that each byte is looked at once however deep the
 * value: ss_sj_key gives the next member's KEY (1, or 0 at the end),
 * ss_sj_next steps to the next element (1, or 0 at the end); then either
 * ss_sj_take gives the value's span (1, or 0 when there is none) and steps
 * over it, or ss_sj_enter starts INNER, a walk inside the value when it is
 * an object (OPEN '{') or an array ('['): 0, or -1 with the value stepped
 * over when it is not; once done with INNER (to its end or not),
 * ss_sj_leave goes on after the value.
 */
int ss_sj_key(ss_sj_iter *it, ss_sj_span *key);
int ss_sj_next(ss_sj_iter *it);
int ss_sj_take(ss_sj_iter *it, ss_sj_span *value);
int ss_sj_enter(ss_sj_iter *it, ss_sj_iter *inner, char open);
void ss_sj_leave(ss_sj_iter *it, const ss_sj_iter *inner);

/* 1 when KEY (a member's key span) is the string NAME, written without
 * escapes. */
int ss_sj_key_is(ss_sj_span key, const char *name);

/* Is V a string, a number? */
int ss_sj_is_str(ss_sj_span v);
int ss_sj_is_num(ss_sj_span v);

/* Decodes the string V (of a value ss_sj_value accepted) into OUT (room
 * for at least V's length in bytes, which the decoded text never
 * exceeds, plus its NUL): returns its length.  \u escapes become UTF-8 (a lone surrogate: U+FFFD); a
 * decoded NUL ends the text there. */
size_t ss_sj_str(ss_sj_span v, char *out);

/* The number V, or DEF when V is not a number. */
double ss_sj_num(ss_sj_span v, double def);

#endif
