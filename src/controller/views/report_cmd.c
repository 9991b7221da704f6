/*
 * report_cmd.c - the command lines of `stepscope report`, `stepscope runs`
 * and `stepscope upgrade` (report.h).
 *
 * report and runs open the store through the read API (reader.h), which
 * never writes, so they work on a store the user may only read and on a
 * read-only file system; upgrade is the one command besides `run` that
 * writes to a store: it opens it through the writer, which migrates the
 * schema and, on closing, folds a write-ahead log left behind into the
 * file.
 */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "html_report.h"
#include "numparse.h"
#include "reader.h"
#include "report_model.h"
#include "store.h"
#include "store_schema.h"

typedef struct {
    const char *db;
    const char *run;
    int json;
    int64_t attempt; /* -1: the latest */
    int html;           /* --html (html_report.c) */
    const char *output; /* -o FILE with --html */
} opts;

static const char report_usage[] =
    "usage: stepscope report [--db PATH] [--json] [--attempt N] [RUN]\n"
    "       stepscope report --html [-o FILE] [--db PATH] [--attempt N] [RUN]\n"
    "\n"
    "Explains a recorded run: findings first, then step time (median rank\n"
    "vs worst rank), phases, ranks, dropped data and events.\n"
    "\n"
    "  RUN          a run id, a run name (its latest run) or a uuid prefix;\n"
    "               default: the latest run\n"
    "  --db PATH    the store; default: $XDG_DATA_HOME/stepscope/stepscope.db\n"
    "               or ~/.local/share/stepscope/stepscope.db\n"
    "  --json       print one JSON object (docs/report-json.md)\n"
    "  --html       write the dashboard's charts of the run as one HTML file\n"
    "               that needs no network (docs/dashboard.md)\n"
    "  -o FILE      where --html writes; default: stepscope-run-ID.html,\n"
    "               '-' for stdout\n"
    "  --attempt N  report attempt N of a restarted run; default: the latest\n"
    "  -h, --help   print this help\n";

static const char runs_usage[] =
    "usage: stepscope runs [--db PATH] [--json]\n"
    "\n"
    "Lists the runs in the store, oldest first.\n"
    "\n"
    "  --db PATH    the store; default: $XDG_DATA_HOME/stepscope/stepscope.db\n"
    "               or ~/.local/share/stepscope/stepscope.db\n"
    "  --json       print {\"db\": PATH, \"runs\": [...]}\n"
    "  -h, --help   print this help\n";

/* Parses ARGV into O.  Returns -1 to go on, or the exit status to return
 * (0 after --help, 2 for a usage error, reported on ERR). */
static int parse_args(const char *cmd, int argc, char **argv, int with_run,
                      opts *o, FILE *out, FILE *err)
{
    const char *usage = with_run ? report_usage : runs_usage;
    *o = (opts){NULL, NULL, 0, -1, 0, NULL};
    int only_args = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (!only_args && strcmp(a, "--") == 0) {
            only_args = 1;
        } else if (!only_args && (strcmp(a, "-h") == 0 ||
                                  strcmp(a, "--help") == 0)) {
            fputs(usage, out);
            return 0;
        } else if (!only_args && strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (!only_args && with_run && strcmp(a, "--html") == 0) {
            o->html = 1;
        } else if (!only_args && with_run &&
                   (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
                    strncmp(a, "--output=", 9) == 0)) {
            val = a[1] == '-' && a[8] == '=' ? a + 9
                                             : (i + 1 < argc ? argv[++i] : NULL);
            if (!val || !*val) {
                fprintf(err, "stepscope %s: %s needs a file name ('-' for "
                             "stdout)\n", cmd, a);
                return 2;
            }
            o->output = val;
        } else if (!only_args && (strcmp(a, "--db") == 0 ||
                                  strncmp(a, "--db=", 5) == 0)) {
            val = a[4] == '=' ? a + 5 : (i + 1 < argc ? argv[++i] : NULL);
            if (!val || !*val) {
                fprintf(err, "stepscope %s: --db needs a path\n", cmd);
                return 2;
            }
            o->db = val;
        } else if (!only_args && with_run &&
                   (strcmp(a, "--attempt") == 0 ||
                    strncmp(a, "--attempt=", 10) == 0)) {
            val = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
            int64_t attempt;
            if (!val || ss_parse_i64(val, 0, 999999999, &attempt) != 0) {
                fprintf(err, "stepscope %s: --attempt needs a number (0 is "
                             "the first attempt)\n", cmd);
                return 2;
            }
            o->attempt = attempt;
        } else if (!only_args && a[0] == '-' && a[1] != '\0') {
            fprintf(err, "stepscope %s: unknown option '%s' (see `stepscope "
                         "%s --help`)\n", cmd, a, cmd);
            return 2;
        } else if (with_run && !o->run) {
            o->run = a;
        } else {
            fprintf(err, "stepscope %s: unexpected argument '%s' (see "
                         "`stepscope %s --help`)\n", cmd, a, cmd);
            return 2;
        }
    }
    if (o->html && o->json) {
        fprintf(err, "stepscope %s: --html and --json exclude each other\n",
                cmd);
        return 2;
    }
    if (o->output && !o->html) {
        fprintf(err, "stepscope %s: -o is for --html (the text and JSON "
                     "reports go to stdout)\n", cmd);
        return 2;
    }
    return -1;
}

/* Opens the store O->db (NULL: the default) for CMD.  NULL with the reason
 * printed. */
static ss_reader *open_store(const char *cmd, const opts *o, FILE *err)
{
    char msg[1024];
    ss_reader *r = ss_reader_open(o->db, msg, sizeof msg);
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

int ss_report_cmd(int argc, char **argv, FILE *out, FILE *err)
{
    opts o;
    int rc = parse_args("report", argc, argv, 1, &o, out, err);
    if (rc >= 0)
        return rc;
    ss_reader *r = open_store("report", &o, err);
    if (!r)
        return 1;
    int64_t run_id = 0;
    rc = 1;
    if (ss_reader_select_run(r, o.run, &run_id) != 0) {
        fprintf(err, "stepscope report: %s\n", ss_reader_errmsg(r));
    } else if (o.html) {
        rc = ss_html_report_cmd(ss_reader_path(r), run_id, o.attempt,
                                o.output, out, err);
    } else {
        ss_report rp;
        if (ss_report_load(r, run_id, o.attempt, &rp, err) == 0) {
            int nomem = 0;
            if (o.json)
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

int ss_runs_cmd(int argc, char **argv, FILE *out, FILE *err)
{
    opts o;
    int rc = parse_args("runs", argc, argv, 0, &o, out, err);
    if (rc >= 0)
        return rc;
    ss_reader *r = open_store("runs", &o, err);
    if (!r)
        return 1;
    ss_run_row *runs;
    size_t n;
    rc = 1;
    if (ss_reader_runs(r, &runs, &n) != 0) {
        fprintf(err, "stepscope runs: %s\n", ss_reader_errmsg(r));
    } else {
        int nomem = 0;
        if (o.json)
            nomem = ss_runs_print_json(out, runs, n, ss_reader_path(r));
        else
            ss_runs_print_text(out, runs, n, ss_reader_path(r));
        rc = finish_output("runs", out, err, nomem);
        ss_run_rows_free(runs, n);
    }
    ss_reader_close(r);
    return rc;
}

static const char upgrade_usage[] =
    "usage: stepscope upgrade [--db PATH]\n"
    "\n"
    "Brings a store written by an older stepscope up to this version's\n"
    "schema, and folds a write-ahead log that a stopped writer left beside\n"
    "it (PATH-wal) into the file, so that it can be read where it cannot be\n"
    "written (docs/store.md).  Run it as a user who may write the store and\n"
    "its directory; the readers (report, runs, trace, serve) never write.\n"
    "\n"
    "  --db PATH    the store; default: $XDG_DATA_HOME/stepscope/stepscope.db\n"
    "               or ~/.local/share/stepscope/stepscope.db\n"
    "  -h, --help   print this help\n";

int ss_upgrade_cmd(int argc, char **argv, FILE *out, FILE *err)
{
    const char *db = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(upgrade_usage, out);
            return 0;
        }
        if (strcmp(a, "--db") == 0 || strncmp(a, "--db=", 5) == 0) {
            db = a[4] == '=' ? a + 5 : (i + 1 < argc ? argv[++i] : NULL);
            if (!db || !*db) {
                fprintf(err, "stepscope upgrade: --db needs a path\n");
                return 2;
            }
            continue;
        }
        fprintf(err, "stepscope upgrade: unexpected argument '%s' (see "
                     "`stepscope upgrade --help`)\n", a);
        return 2;
    }
    char path[4096], msg[1024];
    if (db) {
        snprintf(path, sizeof path, "%s", db);
    } else if (ss_store_default_path(path, sizeof path) != 0) {
        fprintf(err, "stepscope upgrade: neither XDG_DATA_HOME nor HOME is "
                     "set: use --db PATH\n");
        return 1;
    }
    /* The writer creates a missing store: upgrade must not. */
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(err, "stepscope upgrade: %s: %s\n", path,
                errno == ENOENT ? "no store there" : strerror(errno));
        return 1;
    }
    ss_store *s = ss_store_open(path, NULL, 0, msg, sizeof msg);
    if (!s) {
        fprintf(err, "stepscope upgrade: %s\n", msg);
        return 1;
    }
    ss_store_close(s);
    fprintf(out, "stepscope upgrade: %s is at store schema version %d\n",
            path, SS_SCHEMA_VERSION);
    return 0;
}

int ss_report_main(int argc, char **argv)
{
    return ss_report_cmd(argc, argv, stdout, stderr);
}

int ss_runs_main(int argc, char **argv)
{
    return ss_runs_cmd(argc, argv, stdout, stderr);
}

int ss_upgrade_main(int argc, char **argv)
{
    return ss_upgrade_cmd(argc, argv, stdout, stderr);
}
