/*
 * headline.c - the words of a run's headline (headline.h): one line that
 * names the first finding's ranks, phase and kind, shared by the text
 * report, `stepscope top` and the end-of-run summary.
 */
#include "headline.h"

#include <inttypes.h>
#include <string.h>

#include "reader.h"

#define HEADLINE_RANKS 8 /* ranks listed before "…" */

void ss_headline(ss_buf *out, const char *kind, const char *severity,
                 const int64_t *ranks, size_t n_ranks, const char *phase)
{
    if (n_ranks) {
        ss_buf_puts(out, n_ranks == 1 ? "rank " : "ranks ");
        for (size_t i = 0; i < n_ranks && i < HEADLINE_RANKS; i++)
            ss_buf_printf(out, i ? ",%" PRId64 : "%" PRId64, ranks[i]);
        if (n_ranks > HEADLINE_RANKS)
            ss_buf_printf(out, ",\xe2\x80\xa6 (%zu)", n_ranks);
        ss_buf_puts(out, " \xc2\xb7 ");
    }
    if (phase && *phase)
        ss_buf_printf(out, "phase %s \xc2\xb7 ", phase);
    ss_buf_printf(out, "%s ", severity && *severity ? severity : "warning");
    for (const char *k = kind && *kind ? kind : "finding"; *k; k++)
        ss_buf_add(out, *k == '_' ? " " : k, 1);
}

int ss_headline_of_run(const char *db_path, int64_t run_id, ss_buf *out)
{
    char err[256];
    ss_reader *r = ss_reader_open(db_path, err, sizeof err);
    if (!r)
        return 0;
    int64_t attempt;
    ss_finding_row *rows = NULL;
    size_t n = 0;
    int found = 0;
    if (ss_reader_attempt(r, run_id, -1, &attempt, NULL) == 0 &&
        ss_reader_findings(r, run_id, attempt, -1, -1, &rows, &n) == 0 &&
        n > 0) {
        ss_headline(out, rows[0].kind, rows[0].severity, rows[0].ranks,
                    rows[0].n_ranks, rows[0].phase);
        found = 1;
    }
    ss_finding_rows_free(rows, n);
    ss_reader_close(r);
    return found;
}
