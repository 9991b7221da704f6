/*
 * diff.c - `stepscope diff` (diff.h): the comparison of api/run_diff.c
 * written as text or JSON.
 */
#include "diff.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "json.h"
#include "reader.h"
#include "run_diff.h"

static void fmt_ranks(ss_buf *b, const ss_diff_result *res)
{
    ss_buf_printf(b, "rank%s ", res->n_ranks_total == 1 ? "" : "s");
    for (uint32_t i = 0; i < res->n_ranks; i++)
        ss_buf_printf(b, "%s%d", i ? ", " : "", res->ranks[i]);
    if (res->n_ranks_total > res->n_ranks)
        ss_buf_printf(b, " (%u ranks in all)", res->n_ranks_total);
}

static void text(ss_buf *b, const ss_diff_side *a,
                 const ss_diff_side *c, const ss_diff_result *res)
{
    ss_buf_printf(b, "run A: run %" PRId64 " of %s (attempt %" PRId64 ", "
                  "steps %" PRId64 "-%" PRId64 ")\n", a->run,
                  ss_reader_path(a->r), a->attempt, a->first, a->last);
    ss_buf_printf(b, "run B: run %" PRId64 " of %s (attempt %" PRId64 ", "
                  "steps %" PRId64 "-%" PRId64 ")\n", c->run,
                  ss_reader_path(c->r), c->attempt, c->first, c->last);
    if (res->status == 2) {
        ss_buf_printf(b, "cannot compare: %s\n", res->why);
        return;
    }
    ss_buf_printf(b, "compared: %" PRId64 " common steps, %" PRId64
                  " with checksums, %" PRId64 " ranks\n", res->common,
                  res->checksum_steps, a->world);
    if (res->status == 0) {
        ss_buf_puts(b, "identical: every loss, numerics value and "
                       "checksum is the same\n");
        return;
    }
    ss_buf_printf(b, "diverged at step %" PRId64 " on ", res->step);
    fmt_ranks(b, res);
    ss_buf_printf(b, ": %s first",
                  strcmp(res->what, "loss") == 0 ? "the loss differs"
                  : strcmp(res->what, "numerics") == 0
                      ? "a numerics value (a gradient or parameter norm) "
                        "differs"
                      : "the parameters' checksums differ");
    if (strcmp(res->what, "loss") == 0)
        ss_buf_printf(b, " (%.9g vs %.9g)", res->loss_a, res->loss_b);
    ss_buf_puts(b, "\n");
    if (res->param[0])
        ss_buf_printf(b, "first parameter that differs: %s (%u of %u "
                      "differ on rank %d)\n", res->param,
                      res->params_differ, res->params_total, res->ranks[0]);
    if (res->last_step >= 0)
        ss_buf_printf(b, "after it the mean loss differs by up to %.6g "
                      "(step %" PRId64 "), by %.6g at the last common step "
                      "%" PRId64 "\n", res->max_loss_diff,
                      res->max_loss_step, res->last_loss_diff,
                      res->last_step);
}

int ss_diff_cmd(const ss_diff_opts *o, FILE *out, FILE *err)
{
    ss_diff_side a = {.spec = o->run_a}, c = {.spec = o->run_b};
    int status = 2;
    ss_diff_result res = {0};
    ss_buf b = {0};
    char msg[1024];
    a.r = ss_reader_open(o->db, msg, sizeof msg);
    if (a.r)
        c.r = ss_reader_open(o->db_b ? o->db_b : o->db, msg, sizeof msg);
    if (!a.r || !c.r) {
        fprintf(err, "stepscope diff: %s\n", msg);
        goto done;
    }
    if (ss_run_diff(&a, &c, 0, &res, msg, sizeof msg) != 0) {
        fprintf(err, "stepscope diff: %s\n", msg);
        goto done;
    }
    if (res.truncated)
        fprintf(err, "stepscope diff: comparing steps %" PRId64 "-%" PRId64
                " only (a bound of %u rank-steps)\n", res.first, res.last,
                SS_DIFF_MAX_CELLS);
    if (o->json)
        ss_run_diff_json(&b, &a, &c, &res);
    else
        text(&b, &a, &c, &res);
    if (b.oom) {
        fprintf(err, "stepscope diff: out of memory\n");
        goto done;
    }
    fwrite(b.data, 1, b.len, out);
    if (fflush(out) != 0 || ferror(out)) {
        fprintf(err, "stepscope diff: writing the output: %s\n",
                strerror(errno));
        goto done;
    }
    status = res.status;
done:
    ss_buf_free(&b);
    ss_diff_result_free(&res);
    ss_reader_close(a.r);
    ss_reader_close(c.r);
    return status;
}
