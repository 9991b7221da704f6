/*
 * report.h - the `stepscope report`, `stepscope runs` and `stepscope
 * upgrade` commands.
 *
 * report and runs read the store through its read API (reader.h): they
 * never create, migrate or write it.  `report`
 * explains one run attempt, findings first, as text for people or as the
 * JSON object documented in docs/report-json.md, or as one self-contained
 * HTML page (--html: html_report.h); `runs` lists the runs in the store.
 *
 *   stepscope report [--db PATH] [--json] [--attempt N] [RUN]
 *   stepscope report --html [-o FILE] [--db PATH] [--attempt N] [RUN]
 *   stepscope runs   [--db PATH] [--json]
 *   stepscope upgrade [--db PATH]
 *
 * RUN is a numeric run id, a run name (the latest run of that name) or a
 * prefix of a run's uuid; the latest run by default.  PATH defaults to
 * ss_store_default_path().
 */
#ifndef STEPSCOPE_REPORT_H
#define STEPSCOPE_REPORT_H

#include <stdio.h>

/*
 * `stepscope report`.  ARGV[0] is the subcommand's name.  Writes the report
 * to OUT and errors, one line each starting "stepscope report: ", to ERR.
 * Returns the process exit status: 0 on success (and for --help), 1 when
 * the report cannot be made (no store, not a store, no such run, an empty
 * store), 2 for a usage error.  OUT and ERR stay open.
 */
int ss_report_cmd(int argc, char **argv, FILE *out, FILE *err);

/* `stepscope runs`: the same conventions as ss_report_cmd; an empty store
 * is not an error (it says so and returns 0). */
int ss_runs_cmd(int argc, char **argv, FILE *out, FILE *err);

/* `stepscope upgrade`: opens the existing store through the writer, which
 * migrates it to this version's schema and folds a left-over write-ahead
 * log into it (docs/store.md).  Never creates a store.  Returns 0, 1 when
 * the store is missing or cannot be opened for writing, 2 for a usage
 * error. */
int ss_upgrade_cmd(int argc, char **argv, FILE *out, FILE *err);

/* The commands on stdout and stderr. */
int ss_report_main(int argc, char **argv);
int ss_runs_main(int argc, char **argv);
int ss_upgrade_main(int argc, char **argv);

#endif
