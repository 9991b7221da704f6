/*
 * html_report.c - `stepscope report --html`: the dashboard as one file.
 *
 * The page is web/index.html as compiled in (web_assets.h), rewritten on
 * the way out: every `<link rel="stylesheet" href="F">` becomes a <style>
 * holding F, every `<script src="F"></script>` a <script> holding F, and
 * the `<!-- stepscope:data -->` marker the run's API documents as JSON
 * (query.h builds them, exactly as the HTTP API serves them).  The page's
 * script finds that JSON and draws from it instead of fetching.
 *
 * Inlined text must not end its element early: in scripts "</script" and
 * "<!--" get a backslash after the '<' (inside JS strings, regular
 * expressions and comments, the only places they can occur, the backslash
 * changes nothing); in stylesheets "</style" likewise; in the JSON every
 * '<' is written \u003c (it can only occur inside strings there).
 *
 * Cost: one pass over the store's steps (query.c reads them through the
 * store reader in pages of SS_QUERY_MAX_STEPS), kept in memory once as
 * JSON (about 0.5 KB per step with four phases), plus the heat map's
 * latest SS_HTML_HEAT_STEPS columns.
 */
#include "html_report.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "stepscope.h"
#include "web_assets.h"

#define DATA_MARKER "<!-- stepscope:data -->"
#define CSS_LINK "<link rel=\"stylesheet\" href=\""
#define SCRIPT_SRC "<script src=\""

/* ---- the embedded data ---- */

/* Appends the JSON object described in html_report.h to DATA. */
static int build_data(ss_buf *data, ss_query *q, const char *db_path,
                      int64_t run_id, int64_t attempt, char *err,
                      size_t errlen)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ss_buf_puts(data, "{\"format\":\"stepscope.html/1\",\"version\":");
    ss_buf_json_str(data, SS_VERSION_STRING);
    ss_buf_puts(data, ",\"generated_at\":");
    ss_buf_json_time(data, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
    ss_buf_puts(data, ",\"db\":");
    ss_buf_json_str(data, db_path);
    ss_buf_puts(data, ",\"run\":");
    int rc = ss_query_run(q, run_id, attempt, NULL, data, err, errlen);
    if (rc != 0)
        return rc;

    ss_buf_puts(data, ",\"step_pages\":");
    rc = ss_query_step_pages(q, run_id, attempt, data, err, errlen);
    if (rc != 0)
        return rc;
    ss_buf_puts(data, ",\"heatmap\":");
    ss_query_range heat = {attempt, -1, -1, SS_HTML_HEAT_STEPS};
    rc = ss_query_heatmap(q, run_id, &heat, data, err, errlen);
    if (rc == 0) {
        ss_buf_puts(data, ",\"host\":");
        rc = ss_query_host(q, run_id, &heat, data, err, errlen);
    }
    if (rc == 0) {
        ss_buf_puts(data, ",\"ranks\":");
        rc = ss_query_ranks(q, run_id, attempt, NULL, data, err, errlen);
    }
    if (rc == 0) {
        ss_buf_puts(data, ",\"findings\":");
        rc = ss_query_findings(q, run_id, attempt, data, err, errlen);
    }
    if (rc == 0) {
        ss_buf_puts(data, ",\"events\":");
        rc = ss_query_events(q, run_id, 0, SS_QUERY_MAX_EVENTS, data, err,
                             errlen);
    }
    if (rc == 0) {
        ss_buf_puts(data, ",\"goodput\":");
        rc = ss_query_goodput(q, run_id,
                              (int64_t)now.tv_sec * 1000000000 + now.tv_nsec,
                              0, data, err, errlen);
    }
    if (rc == 0) {
        ss_buf_puts(data, ",\"values\":");
        rc = ss_query_values_embed(q, run_id, attempt, SS_HTML_VALUES_NAMES,
                                   SS_HTML_HEAT_STEPS, data, err, errlen);
    }
    ss_buf_puts(data, "}");
    if (rc == 0 && data->oom) {
        snprintf(err, errlen, "out of memory");
        rc = SS_QUERY_ERROR;
    }
    return rc;
}

/* ---- inlining ---- */

static const ss_static_file *find_file(const char *path, size_t n)
{
    for (size_t i = 0; i < ss_web_files_count; i++)
        if (strlen(ss_web_files[i].path) == n + 1 &&
            ss_web_files[i].path[0] == '/' &&
            memcmp(ss_web_files[i].path + 1, path, n) == 0)
            return &ss_web_files[i];
    return NULL;
}

/* Appends S[0..N) to PAGE with a backslash after the '<' of every
 * occurrence of each of the (case-insensitive) needles in AVOID. */
static void add_escaped(ss_buf *page, const char *s, size_t n,
                        const char *const *avoid)
{
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '<')
            continue;
        for (const char *const *a = avoid; *a; a++) {
            size_t k = strlen(*a);
            if (n - i >= k && strncasecmp(s + i, *a, k) == 0) {
                ss_buf_add(page, s + from, i + 1 - from);
                ss_buf_puts(page, "\\");
                from = i + 1;
                break;
            }
        }
    }
    ss_buf_add(page, s + from, n - from);
}

/* The JSON DATA with every '<' as \u003c. */
static void add_json(ss_buf *page, const char *data, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i < n; i++)
        if (data[i] == '<') {
            ss_buf_add(page, data + from, i - from);
            ss_buf_puts(page, "\\u003c");
            from = i + 1;
        }
    ss_buf_add(page, data + from, n - from);
}

/* strlen(PREFIX) when the REST bytes at P start with PREFIX, else 0. */
static size_t starts(const char *p, size_t rest, const char *prefix)
{
    size_t n = strlen(prefix);
    return rest >= n && memcmp(p, prefix, n) == 0 ? n : 0;
}

/* At P (REST bytes): a `<link rel="stylesheet" href="F">` or a `<script
 * src="F"></script>` element.  Returns its length and sets *NAME, *NAMELEN
 * (F) and *CSS, or returns 0. */
static size_t file_ref(const char *p, size_t rest, const char **name,
                       size_t *namelen, int *css)
{
    size_t head = starts(p, rest, CSS_LINK);
    *css = head > 0;
    if (!head)
        head = starts(p, rest, SCRIPT_SRC);
    if (!head)
        return 0;
    const char *end = memchr(p + head, '"', rest - head);
    if (!end)
        return 0;
    size_t at = (size_t)(end - p);
    size_t tail = starts(end, rest - at, *css ? "\">" : "\"></script>");
    if (!tail)
        return 0;
    *name = p + head;
    *namelen = at - head;
    return at + tail;
}

/* Rewrites the page template HTML (see the top of this file) into PAGE. */
static int inline_page(ss_buf *page, const char *html, size_t len,
                       const ss_buf *data, char *err, size_t errlen)
{
    static const char *const in_script[] = {"</script", "<!--", NULL};
    static const char *const in_style[] = {"</style", NULL};
    size_t i = 0, from = 0;
    while (i < len) {
        if (html[i] != '<') {
            i++;
            continue;
        }
        const char *p = html + i, *name = NULL;
        size_t rest = len - i, namelen = 0, skip;
        int css = 0;
        ss_buf_add(page, html + from, i - from);
        if ((skip = starts(p, rest, DATA_MARKER)) != 0) {
            ss_buf_puts(page,
                        "<script id=\"ss-data\" type=\"application/json\">");
            add_json(page, data->data, data->len);
            ss_buf_puts(page, "</script>");
        } else if ((skip = file_ref(p, rest, &name, &namelen, &css)) != 0) {
            const ss_static_file *f = find_file(name, namelen);
            if (!f) {
                snprintf(err, errlen, "the page refers to '%.*s', which is "
                         "not built in", (int)namelen, name);
                return SS_QUERY_ERROR;
            }
            ss_buf_puts(page, css ? "<style>\n" : "<script>\n");
            add_escaped(page, (const char *)f->data, f->len,
                        css ? in_style : in_script);
            ss_buf_puts(page, css ? "\n</style>" : "\n</script>");
        } else {
            ss_buf_add(page, "<", 1);
            skip = 1;
        }
        i += skip;
        from = i;
    }
    ss_buf_add(page, html + from, len - from);
    return 0;
}

int ss_html_report_build(ss_buf *page, const char *db_path, int64_t run_id,
                         int64_t attempt, char *err, size_t errlen)
{
    const ss_static_file *tmpl = find_file("", 0);
    if (!tmpl) {
        snprintf(err, errlen, "the dashboard page is not built in");
        return SS_QUERY_ERROR;
    }
    ss_query *q = ss_query_open(db_path, err, errlen);
    if (!q)
        return SS_QUERY_ERROR;
    ss_buf data = {0};
    int rc = build_data(&data, q, db_path, run_id, attempt, err, errlen);
    ss_query_close(q);
    if (rc == 0)
        rc = inline_page(page, (const char *)tmpl->data, tmpl->len, &data,
                         err, errlen);
    if (rc == 0 && page->oom) {
        snprintf(err, errlen, "out of memory");
        rc = SS_QUERY_ERROR;
    }
    ss_buf_free(&data);
    return rc;
}

/* ---- the command ---- */

/* Writes PAGE to PATH through PATH.tmp.PID, a new file that is never a
 * symbolic link someone planted under that name (O_EXCL, O_NOFOLLOW).
 * Returns 0 or -1 with ERR. */
static int write_file(const char *path, const ss_buf *page, char *err,
                      size_t errlen)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >=
        (int)sizeof tmp) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0666);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t n = fwrite(page->data, 1, page->len, f);
    int bad = n != page->len || ferror(f);
    int saved = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    if (!bad && rename(tmp, path) != 0) {
        bad = 1;
        saved = errno;
    }
    if (bad) {
        snprintf(err, errlen, "writing %s: %s", path, strerror(saved));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int ss_html_report_cmd(const char *db_path, int64_t run_id, int64_t attempt,
                       const char *out_path, FILE *out, FILE *err)
{
    char errbuf[512] = "", def[64];
    if (!out_path) {
        snprintf(def, sizeof def, "stepscope-run-%" PRId64 ".html", run_id);
        out_path = def;
    }
    ss_buf page = {0};
    int rc = ss_html_report_build(&page, db_path, run_id, attempt, errbuf,
                                  sizeof errbuf);
    if (rc == SS_QUERY_NOT_FOUND) {
        if (attempt >= 0)
            fprintf(err, "stepscope report: run %" PRId64 " has no attempt %"
                         PRId64 "\n", run_id, attempt);
        else
            fprintf(err, "stepscope report: no run %" PRId64 " in %s\n",
                    run_id, db_path);
    } else if (rc != 0) {
        fprintf(err, "stepscope report: %s\n", errbuf);
    } else if (strcmp(out_path, "-") == 0) {
        if (fwrite(page.data, 1, page.len, out) != page.len ||
            fflush(out) != 0) {
            fprintf(err, "stepscope report: writing the page: %s\n",
                    strerror(errno));
            rc = -1;
        }
    } else if (write_file(out_path, &page, errbuf, sizeof errbuf) != 0) {
        fprintf(err, "stepscope report: %s\n", errbuf);
        rc = -1;
    } else {
        fprintf(out, "wrote %s (%.0f KiB): open it in a browser; it needs "
                     "no network\n", out_path, (double)page.len / 1024.0);
    }
    ss_buf_free(&page);
    return rc == 0 ? 0 : 1;
}
