/*
 * report_cmd.c - the work of `stepscope report` and `stepscope runs`
 * (report.h) once their options are parsed (src/cli/cmd_report.c,
 * cmd_runs.c).
 *
 * Both open the store through the read API (reader.h), which never
 * writes, so they work on a store the user may only read and on a
 * read-only file system.
 */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "html_report.h"
#include "reader.h"
#include "report_model.h"

/* Opens the store DB (NULL: the default) for CMD.  NULL with the reason
 * printed. */
static ss_reader *open_store(const char *cmd, const char *db, FILE *err)
{
    char msg[1024];
    ss_reader *r = ss_reader_open(db, msg, sizeof msg);
    if (!r)
        fprintf(err, "stepscope %s: %s\n", cmd, msg);
    return r;
}

/* Ends a command's output: 1 when it could not be written. */
static int finish_output(const char *cmd, FILE *out, FILE *err, int nomem)
{
    if (nomem) {
        fprintf(err, "stepscope %s: out of memory\n", cmd);
        return 1;
    }
    if (fflush(out) == 0 && !ferror(out))
        return 0;
    fprintf(err, "stepscope %s: writing the output: %s\n", cmd,
            strerror(errno));
    return 1;
}

/* `report --rank R`: the run's model, then the rank's view of it. */
static int rank_view(ss_reader *r, const ss_report_opts *o, int64_t run_id,
                     FILE *out, FILE *err)
{
    ss_report rp;
    ss_report_rank rk = {0};
    int rc = 1;
    if (ss_report_load(r, run_id, o->attempt, &rp, err) == 0 &&
        ss_report_rank_load(r, &rp, o->rank, &rk, err) == 0) {
        int nomem = 0;
        if (rp.attempt == rp.n_attempts - 1) /* the latest: it may run */
            ss_report_rank_live_fetch(ss_reader_path(r), run_id, &rk);
        if (o->json)
            nomem = ss_report_rank_print_json(out, &rp, &rk,
                                              ss_reader_path(r));
        else
            ss_report_rank_print_text(out, &rp, &rk);
        rc = finish_output("report", out, err, nomem);
    }
    ss_report_rank_free(&rk);
    ss_report_free(&rp);
    return rc;
}

int ss_report_cmd(const ss_report_opts *o, FILE *out, FILE *err)
{
    ss_reader *r = open_store("report", o->db, err);
    if (!r)
        return 1;
    int64_t run_id = 0;
    int rc = 1;
    if (ss_reader_select_run(r, o->run, &run_id) != 0) {
        fprintf(err, "stepscope report: %s\n", ss_reader_errmsg(r));
    } else if (o->html) {
        rc = ss_html_report_cmd(ss_reader_path(r), run_id, o->attempt,
                                o->output, out, err);
    } else if (o->rank >= 0) {
        rc = rank_view(r, o, run_id, out, err);
    } else {
        ss_report rp;
        if (ss_report_load(r, run_id, o->attempt, &rp, err) == 0) {
            int nomem = 0;
            if (o->json)
                nomem = ss_report_print_json(out, &rp, ss_reader_path(r));
            else
                ss_report_print_text(out, &rp);
            rc = finish_output("report", out, err, nomem);
        }
        ss_report_free(&rp);
    }
    ss_reader_close(r);
    return rc;
}

int ss_runs_cmd(const ss_runs_opts *o, FILE *out, FILE *err)
{
    ss_reader *r = open_store("runs", o->db, err);
    if (!r)
        return 1;
    ss_run_row *runs;
    size_t n;
    int rc = 1;
    if (ss_reader_runs(r, &runs, &n) != 0) {
        fprintf(err, "stepscope runs: %s\n", ss_reader_errmsg(r));
    } else {
        int nomem = 0;
        if (o->json)
            nomem = ss_runs_print_json(out, runs, n, ss_reader_path(r));
        else
            ss_runs_print_text(out, runs, n, ss_reader_path(r));
        rc = finish_output("runs", out, err, nomem);
        ss_run_rows_free(runs, n);
    }
    ss_reader_close(r);
    return rc;
}
