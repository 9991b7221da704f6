/*
 * top.h - `stepscope top`: a live terminal view of a running job
 * (docs/top.md).
 *
 *   stepscope top [--db PATH] [--url URL] [--token TOKEN] [--interval S]
 *                 [--once] [RUN]
 *
 * It attaches to the controller's HTTP API (found through the live-run
 * file `stepscope run` writes beside the store, <store dir>/live/
 * run-ID.json, or given with --url) and redraws about once a second: step
 * rate, worst vs median step time over the recent steps, one line per rank
 * (step time against the median rank as a bar, current phase, last step,
 * last heard) and the newest findings.  Plain ANSI escape codes, no
 * terminal library; the view follows the terminal's size and quits on `q`
 * or Ctrl-C, leaving the terminal as it was.  When the output is not a
 * terminal (or with --once) it prints one plain snapshot and exits.
 */
#ifndef STEPSCOPE_TOP_H
#define STEPSCOPE_TOP_H

#include <stdint.h>
#include <stdio.h>

/*
 * `stepscope top`.  ARGV[0] is the subcommand's name.  Interactive when
 * OUT is stdout and both stdin and stdout are terminals (and --once is not
 * given); otherwise writes one snapshot to OUT.  Errors go to ERR as one
 * line starting "stepscope top: ".  Returns the exit status: 0 after `q`,
 * Ctrl-C, the end of the run or a snapshot; 1 when no job is running or
 * the controller cannot be reached; 2 for a usage error.
 */
int ss_top_cmd(int argc, char **argv, FILE *out, FILE *err);

/*
 * Finds a running job's controller as `top` does: URL (with TOKEN) when
 * given, else through the live-run file of RUN (an id or name; NULL: the
 * newest live run) beside the store DB (NULL: the default store).  Fills
 * URL_OUT, TOKEN_OUT ("" when none) and *RUN_ID (0 when only URL was
 * given).  Returns 0, or -1 with a one-line reason in ERR.
 */
int ss_top_find_live(const char *db, const char *url, const char *token,
                     const char *run, char *url_out, size_t url_cap,
                     char *token_out, size_t token_cap, int64_t *run_id,
                     char *err, size_t errlen);

/* ss_top_cmd on stdout and stderr. */
int ss_top_main(int argc, char **argv);

#endif
