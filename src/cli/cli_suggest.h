/*
 * cli_suggest.h - "did you mean": the known word nearest to a mistyped
 * one (an option, a command), for the front-ends' one-line usage errors.
 */
#ifndef STEPSCOPE_CLI_SUGGEST_H
#define STEPSCOPE_CLI_SUGGEST_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

/*
 * The word of WORDS[0..N) nearest to WORD by edit distance (insertions,
 * deletions, substitutions and swaps of two neighbours each count one),
 * when it is near enough to be a typo: at most 1 for words of up to 4
 * letters, 2 up to 8, else 3.  NULL when none is (or WORD is empty).
 * Ties go to the first.
 */
const char *ss_cli_suggest(const char *word, const char *const *words,
                           size_t n);

/*
 * The long option of OPTS (ended by a zeroed entry) nearest to TYPED,
 * an argument as typed ("--atuo", "--db=x": the value is ignored), by
 * ss_cli_suggest; NULL when none is near or TYPED is no long option.
 */
const char *ss_cli_suggest_option(const char *typed,
                                  const struct option *opts);

/*
 * Writes to ERR the one line a command CMD ("serve") gives for the
 * unknown option TYPED: "stepscope CMD: unknown option 'TYPED'; did you
 * mean --NEAR? (see `stepscope CMD --help`)", the guess from OPTS by
 * ss_cli_suggest_option and left out when there is none.
 */
void ss_cli_unknown_option(FILE *err, const char *cmd, const char *typed,
                           const struct option *opts);

#endif
