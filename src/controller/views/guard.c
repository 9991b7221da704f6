/*
 * guard.c - `stepscope guard` (guard.h): the verdict of guard_judge
 * (api/guard_judge.c, which chooses the baseline and compares every metric;
 * docs/guard.md) written as a table, Markdown, JUnit XML or JSON.
 */
#include "guard.h"

#include <errno.h>
#include <string.h>

#include "guard_model.h"

/* Writes one report file with WRITE; -1 with a message when it fails. */
static int write_file(const char *path, void (*write)(FILE *, const guard_report *),
                      const guard_report *rep, FILE *err)
{
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (!f) {
        fprintf(err, "stepscope guard: cannot write %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    write(f, rep);
    int bad = ferror(f);
    if (f != stdout)
        bad |= fclose(f) != 0;
    if (bad) {
        fprintf(err, "stepscope guard: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

int ss_guard_cmd(const ss_guard_opts *o, FILE *out, FILE *err)
{
    char msg[512];
    guard_judgement j = {0};
    int status = SS_GUARD_CANNOT_JUDGE;
    ss_reader *rd = ss_reader_open(o->db, msg, sizeof msg);
    guard_request q = {o->run ? o->run : o->name, o->baseline, o->metrics,
                       o->n_metrics};
    if (!rd || guard_judge(rd, &q, o->settings, &j, msg, sizeof msg) != 0) {
        fprintf(err, "stepscope guard: %s\n", msg);
        goto done;
    }
    guard_report *rep = &j.rep;
    if (o->json)
        guard_write_json(out, rep);
    else
        guard_print_table(out, rep);
    if (o->markdown && write_file(o->markdown, guard_write_markdown, rep, err))
        rep->status = SS_GUARD_CANNOT_JUDGE;
    if (o->junit && write_file(o->junit, guard_write_junit, rep, err))
        rep->status = SS_GUARD_CANNOT_JUDGE;
    status = rep->status;
done:
    guard_judgement_free(&j);
    ss_reader_close(rd);
    return status;
}
