/*
 * stack_json.h - a strict reader of the JSON that ranks' stacks travel in
 * (stack_collect.h's per-rank objects), without a tree and without an
 * allocation per value: thousands of ranks' objects, megabytes in all,
 * are checked and read on the controller's loop at every stacks request
 * (docs/performance.md, "Every rank's stacks").
 *
 * ss_sj_value checks one value by RFC 8259's grammar (strings and their
 * escapes, control characters refused, numbers, the three literals,
 * nesting at most SS_SJ_MAX_DEPTH); the iterators walk the members of an
 * object or the elements of an array that was checked, each value as the
 * span of its bytes; ss_sj_str decodes a string's span.  Pure: no I/O, no
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
 * them, never reading past the span's end). */
typedef struct {
    const char *p, *end;
    int first;
} ss_sj_iter;

/* Starts a walk over V; 0, or -1 when V is not an object (or array). */
int ss_sj_object(ss_sj_span v, ss_sj_iter *it);
int ss_sj_array(ss_sj_span v, ss_sj_iter *it);

/* The next member (its KEY, quotes included, and VALUE), or element
 * (VALUE): 1, or 0 at the end. */
int ss_sj_member(ss_sj_iter *it, ss_sj_span *key, ss_sj_span *value);
int ss_sj_element(ss_sj_iter *it, ss_sj_span *value);

/* 1 when KEY (a member's key span) is the string NAME, written without
 * escapes. */
int ss_sj_key_is(ss_sj_span key, const char *name);

/* Is V a string, null, a number? */
int ss_sj_is_str(ss_sj_span v);
int ss_sj_is_null(ss_sj_span v);
int ss_sj_is_num(ss_sj_span v);

/* Decodes the string V into OUT (room for at least V's length in bytes,
 * which the decoded text never exceeds, plus its NUL): returns its
 * length.  \u escapes become UTF-8 (a lone surrogate: U+FFFD); a
 * decoded NUL ends the text there. */
size_t ss_sj_str(ss_sj_span v, char *out);

/* The number V, or DEF when V is not a number. */
double ss_sj_num(ss_sj_span v, double def);

#endif
