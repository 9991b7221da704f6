/*
 * stack_collect.c - every rank's stacks on the loop (stack_collect.h).
 *
 * One request runs at a time; the others wait in a short queue.  A request
 * owns, per rank, the Python answer (taken from the reading from memory,
 * stack_memory.h, or read from the stack file, on a 1 or 5 ms timer that
 * runs only while a request does) and, with native frames, a
 * helper process and its stdout pipe.  When every rank has answered or
 * the deadline passed (the helpers still running are then killed), the
 * innermost frames' source lines are read on a thread of source_lines.c,
 * for at most SS_STACK_SOURCE_MS: the loop never opens a file a rank's
 * stack names (a FIFO or a hung mount would stop it).  Once every handle
 * is closed the callback gets one JSON object per rank.
 *
 * The loop opens only the ranks' stack files, in the controller's private
 * directory, and those without blocking (O_NONBLOCK: a FIFO put in a
 * file's place opens at once or fails) and only when regular.
 */
#include "stack_collect.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "source_lines.h"
#include "stack_memory.h"

#define POLL_MS 5
#define FAST_POLL_MS 1 /* while the reading from memory or sources run */
static const char end_marker[] = "\n# stepscope: end of stacks\n";

typedef struct rank_job rank_job;
typedef struct request request;

/* The innermost frame of one thread in a rank's "threads" JSON: its
 * source line goes at offset AT of that text. */
typedef struct {
    size_t at;
    char *file;
    long line;
} leaf;

struct rank_job {
    request *req;
    uint32_t rank;
    pid_t pid;
    char *file;
    const char *state;   /* NULL while waiting for the Python answer */
    char why[256];
    ss_buf threads;      /* the "threads" array's JSON */
    leaf *leaves;        /* one per thread, in the order of THREADS */
    size_t n_leaves, cap_leaves;
    size_t first_line;   /* its leaves' first index in the source lines */
    int reading;         /* waiting for its stacks read from memory */
    int was_stopped;     /* stopped when the request began, before our
                          * native helpers attached (a traced rank is 't'
                          * in /proc while they unwind it) */
    const char *via;     /* how it answered: "memory" or "signal" */
    char mem_why[256];   /* why its memory was not read ("" when it was) */
    int signalled;
    /* native */
    int native_running;  /* helper spawned, not yet reaped */
    int pipe_open;
    uv_process_t proc;
    uv_pipe_t out;
    ss_buf native;       /* the helper's output */
    int native_cut;
    char native_err[160];
};

struct request {
    ss_stack_collector *c;
    request *next;
    rank_job *ranks;
    size_t n;
    ss_stack_options opt;
    ss_stack_done_cb cb;
    void *ctx;
    double started_ms;
    int open_handles;
    int finishing;
    ss_stack_memory *memory;  /* the reading from memory; NULL: none */
    int sources_asked;        /* the source lines were asked for */
    double sources_ms;        /* when */
    ss_source_lines *sources; /* NULL: none (none wanted, or no reader) */
};

struct ss_stack_collector {
    uv_loop_t *loop;
    char *exe;
    char *host;
    uv_timer_t poll;
    request *running;
    request *queue_head, *queue_tail;
    size_t queued;
    int closing;
    int poll_closed;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int ss_stack_signal(void)
{
    return SIGRTMIN + SS_STACK_SIGNAL_OFFSET;
}

/* /proc/PID/stat's state letter, or 0 when the process is gone. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' ? paren[2] : 0;
}

/* 1 when process PID holds FILE open (the rank's handler writes to that
 * descriptor): a process that exec'ed another program since, or a file
 * that another process replaced, is not signalled. */
static int holds_file(pid_t pid, const char *file)
{
    struct stat want;
    if (stat(file, &want) != 0)
        return 0;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        struct stat sb;
        if (e->d_name[0] != '.' &&
            fstatat(dirfd(d), e->d_name, &sb, 0) == 0)
            found = sb.st_dev == want.st_dev && sb.st_ino == want.st_ino;
    }
    closedir(d);
    return found;
}

/* ---- faulthandler's dump ---- */

typedef struct {
    char *func, *file;
    long line;
} py_frame;

static void emit_thread(ss_buf *out, int *nthreads, const char *id,
                        int current, py_frame *fr, size_t nfr,
                        ss_stack_leaf_fn on_leaf, void *ctx)
{
    ss_buf_printf(out, "%s{\"id\":", (*nthreads)++ ? "," : "");
    ss_buf_json_str(out, id);
    ss_buf_printf(out, ",\"current\":%s,\"frames\":[",
                  current ? "true" : "false");
    /* faulthandler lists the innermost first; we write the call path. */
    for (size_t k = nfr; k-- > 0;) {
        ss_buf_puts(out, "{\"func\":");
        ss_buf_json_str(out, fr[k].func);
        ss_buf_puts(out, ",\"file\":");
        ss_buf_json_str(out, fr[k].file);
        ss_buf_printf(out, ",\"line\":%ld", fr[k].line);
        if (k == 0 && on_leaf)
            on_leaf(ctx, fr[k].file, fr[k].line, out->len);
        ss_buf_puts(out, k ? "}," : "}");
    }
    ss_buf_puts(out, "]}");
}

void ss_stack_parse_dump(const char *text, size_t len, ss_buf *out,
                         ss_stack_leaf_fn on_leaf, void *ctx)
{
    enum { MAX_FRAMES = 256 };
    py_frame fr[MAX_FRAMES];
    size_t nfr = 0;
    char id[64] = "";
    int in_thread = 0, current = 0, nthreads = 0, start = (int)out->len;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char line[1024];
        if (ll >= sizeof line)
            ll = sizeof line - 1;
        memcpy(line, p, ll);
        line[ll] = '\0';
        p = nl ? nl + 1 : end;

        const char *t = NULL;
        int cur = 0;
        if (strncmp(line, "Current thread ", 15) == 0) {
            t = line + 15;
            cur = 1;
        } else if (strncmp(line, "Thread ", 7) == 0) {
            t = line + 7;
        } else if (strncmp(line, "Stack (most recent call first)", 30) == 0) {
            t = "";
            cur = 1;
        }
        if (t) {
            if (in_thread)
                emit_thread(out, &nthreads, id, current, fr, nfr, on_leaf,
                            ctx);
            for (size_t k = 0; k < nfr; k++) {
                free(fr[k].func);
                free(fr[k].file);
            }
            nfr = 0;
            in_thread = 1;
            current = cur;
            size_t il = strcspn(t, " ");
            snprintf(id, sizeof id, "%.*s", (int)(il < 63 ? il : 63), t);
            continue;
        }
        /*   File "x.py", line 12 in func */
        if (!in_thread || strncmp(line, "  File \"", 8) != 0)
            continue;
        char *fname = line + 8;
        char *q = strstr(fname, "\", line ");
        if (!q)
            continue;
        *q = '\0';
        char *rest = q + 8, *after;
        long ln = strtol(rest, &after, 10);
        const char *func = "?";
        if (strncmp(after, " in ", 4) == 0)
            func = after + 4;
        if (nfr < MAX_FRAMES) {
            fr[nfr].func = strdup(func);
            fr[nfr].file = strdup(fname);
            fr[nfr].line = ln;
            if (fr[nfr].func && fr[nfr].file)
                nfr++;
            else {
                free(fr[nfr].func);
                free(fr[nfr].file);
            }
        }
    }
    if (in_thread)
        emit_thread(out, &nthreads, id, current, fr, nfr, on_leaf, ctx);
    for (size_t k = 0; k < nfr; k++) {
        free(fr[k].func);
        free(fr[k].file);
    }
    (void)start;
}

/* ---- one request ---- */

static void start_next(ss_stack_collector *c);

/* A closing collector is freed once its timer is closed and no request
 * is left. */
static void free_if_done(ss_stack_collector *c)
{
    if (!c->closing || !c->poll_closed || c->running || c->queue_head)
        return;
    free(c->exe);
    free(c->host);
    free(c);
}

static void answer(rank_job *j, const char *state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void answer(rank_job *j, const char *state, const char *fmt, ...)
{
    j->state = state;
    j->why[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->why, sizeof j->why, fmt, ap);
        va_end(ap);
    }
}

/* Opens the stack file FILE with FLAGS, never blocking, and only when it
 * is a regular file: the rank's directory is the controller's, but a rank
 * can put a FIFO there.  Returns the descriptor or -1. */
static int open_stack_file(const char *file, int flags)
{
    int fd = open(file, flags | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY |
                            O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Notes the innermost frame of a thread of rank job CTX. */
static void on_leaf(void *ctx, const char *file, long line, size_t at)
{
    rank_job *j = ctx;
    if (j->n_leaves == j->cap_leaves) {
        size_t cap = j->cap_leaves ? 2 * j->cap_leaves : 8;
        leaf *grown = realloc(j->leaves, cap * sizeof *grown);
        if (!grown)
            return; /* that thread's line is left out */
        j->leaves = grown;
        j->cap_leaves = cap;
    }
    char *copy = strdup(file);
    if (!copy)
        return;
    j->leaves[j->n_leaves++] = (leaf){at, copy, line};
}

/* 1 when the stack file holds the end marker (and then parses it). */
static int read_answer(rank_job *j)
{
    int fd = open_stack_file(j->file, O_RDONLY);
    if (fd < 0)
        return 0;
    char *buf = malloc(SS_STACK_MAX_DUMP + 1);
    if (!buf) {
        close(fd);
        return 0;
    }
    size_t len = 0;
    ssize_t n;
    while (len < SS_STACK_MAX_DUMP &&
           (n = read(fd, buf + len, SS_STACK_MAX_DUMP - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = '\0';
    char *m = memmem(buf, len, end_marker, sizeof end_marker - 1);
    int done = m != NULL;
    if (done) {
        ss_stack_parse_dump(buf, (size_t)(m - buf), &j->threads, on_leaf, j);
        answer(j, "ok", NULL);
    }
    free(buf);
    return done;
}

static int native_pending(const request *q)
{
    for (size_t i = 0; i < q->n; i++)
        if (q->ranks[i].native_running || q->ranks[i].pipe_open)
            return 1;
    return 0;
}

static void write_rank(const request *q, rank_job *j, ss_buf *b)
{
    const ss_stack_collector *c = q->c;
    ss_buf_printf(b, "{\"rank\":%u,\"host\":", j->rank);
    ss_buf_json_str(b, c->host);
    ss_buf_printf(b, ",\"pid\":%d,\"state\":", (int)j->pid);
    ss_buf_json_str(b, j->state ? j->state : "no_answer");
    if (j->via && j->state &&
        (strcmp(j->state, "ok") == 0 || strcmp(j->via, "memory") == 0)) {
        ss_buf_puts(b, ",\"via\":");
        ss_buf_json_str(b, j->via);
        if (j->mem_why[0]) {
            ss_buf_puts(b, ",\"memory_error\":");
            ss_buf_json_str(b, j->mem_why);
        }
    }
    ss_buf_puts(b, ",\"why\":");
    if (j->why[0])
        ss_buf_json_str(b, j->why);
    else
        ss_buf_puts(b, "null");
    ss_buf_puts(b, ",\"threads\":[");
    size_t from = 0;
    for (size_t k = 0; j->threads.data && k < j->n_leaves; k++) {
        const char *code = ss_source_lines_get(q->sources,
                                               j->first_line + k);
        if (!code)
            continue;
        ss_buf_add(b, j->threads.data + from, j->leaves[k].at - from);
        from = j->leaves[k].at;
        ss_buf_puts(b, ",\"code\":");
        ss_buf_json_str(b, code);
    }
    if (j->threads.data)
        ss_buf_add(b, j->threads.data + from, j->threads.len - from);
    ss_buf_puts(b, "]");
    if (q->opt.native) {
        /* The helper wrote {"pid":P,"threads":[…],"error":…}\n: take its
         * threads array and error as they are (our own JSON writer). */
        const char *s = j->native.data;
        const char *th = s ? strstr(s, ",\"threads\":[") : NULL;
        const char *er = s ? strstr(s, ",\"error\":\"") : NULL;
        size_t sl = s ? strlen(s) : 0;
        while (sl && (s[sl - 1] == '\n' || s[sl - 1] == ' '))
            sl--;
        if (th && !j->native_cut && sl && s[sl - 1] == '}') {
            ss_buf_puts(b, ",\"native_threads\":");
            ss_buf_add(b, th + 11, (size_t)(s + sl - 1 - (th + 11)));
            if (er && er < th) { /* a JSON string already: copy it */
                ss_buf_puts(b, ",\"native_error\":");
                ss_buf_add(b, er + 9, (size_t)(th - (er + 9)));
            }
        } else {
            ss_buf_puts(b, ",\"native_threads\":[],\"native_error\":");
            ss_buf_json_str(b, j->native_err[0] ? j->native_err
                               : j->native_cut ? "the helper's output was too "
                                                 "long"
                                               : "no native stack");
        }
    }
    ss_buf_puts(b, "}");
}

static void request_free(request *q)
{
    ss_source_lines_release(q->sources);
    ss_stack_memory_release(q->memory);
    for (size_t i = 0; i < q->n; i++) {
        for (size_t k = 0; k < q->ranks[i].n_leaves; k++)
            free(q->ranks[i].leaves[k].file);
        free(q->ranks[i].leaves);
        free(q->ranks[i].file);
        ss_buf_free(&q->ranks[i].threads);
        ss_buf_free(&q->ranks[i].native);
    }
    free(q->ranks);
    free(q);
}

/* Every handle of Q is closed: answer and free it. */
static void deliver(request *q)
{
    ss_stack_collector *c = q->c;
    char **docs = calloc(q->n ? q->n : 1, sizeof *docs);
    for (size_t i = 0; docs && i < q->n; i++) {
        ss_buf b = {0};
        write_rank(q, &q->ranks[i], &b);
        docs[i] = b.oom ? NULL : b.data;
        if (!docs[i]) {
            ss_buf_free(&b);
            docs[i] = strdup("{\"state\":\"no_answer\",\"why\":\"out of "
                             "memory\"}");
        }
    }
    if (docs)
        q->cb(q->ctx, (const char *const *)docs, docs ? q->n : 0,
              now_ms() - q->started_ms);
    else
        q->cb(q->ctx, NULL, 0, now_ms() - q->started_ms);
    for (size_t i = 0; docs && i < q->n; i++)
        free(docs[i]);
    free(docs);
    if (c->running == q)
        c->running = NULL;
    request_free(q);
    if (!c->closing)
        start_next(c);
    else
        free_if_done(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    rank_job *j = h->data;
    request *q = j->req;
    if (--q->open_handles == 0 && q->finishing)
        deliver(q);
}

/* Asks a reader thread for the innermost frames' source lines. */
static void ask_sources(request *q)
{
    q->sources_asked = 1;
    q->sources_ms = now_ms();
    size_t n = 0;
    for (size_t i = 0; i < q->n; i++) {
        q->ranks[i].first_line = n;
        n += q->ranks[i].n_leaves;
    }
    const char **files = n ? malloc(n * sizeof *files) : NULL;
    long *lines = n ? malloc(n * sizeof *lines) : NULL;
    if (files && lines) {
        size_t k = 0;
        for (size_t i = 0; i < q->n; i++)
            for (size_t l = 0; l < q->ranks[i].n_leaves; l++, k++) {
                files[k] = q->ranks[i].leaves[l].file;
                lines[k] = q->ranks[i].leaves[l].line;
            }
        q->sources = ss_source_lines_start(files, lines, n);
    }
    free(files);
    free(lines);
}

/* The Python side is settled (answered or deadline): finish when the
 * native helpers are too, and the source lines are read or their time
 * (SS_STACK_SOURCE_MS) is up.  Called again by the poll timer. */
static void maybe_finish(request *q)
{
    if (q->finishing)
        return;
    for (size_t i = 0; i < q->n; i++)
        if (!q->ranks[i].state)
            return;
    if (native_pending(q))
        return;
    if (!q->sources_asked && !q->c->closing)
        ask_sources(q);
    if (q->sources && !ss_source_lines_done(q->sources) && !q->c->closing &&
        now_ms() - q->sources_ms < SS_STACK_SOURCE_MS)
        return; /* the poll timer looks again */
    q->finishing = 1;
    uv_timer_stop(&q->c->poll);
    if (q->open_handles == 0)
        deliver(q);
}

static void deadline_passed(request *q)
{
    double waited = (now_ms() - q->started_ms) / 1000.0;
    for (size_t i = 0; i < q->n; i++) {
        rank_job *j = &q->ranks[i];
        if (!j->state) {
            char st = proc_state(j->pid);
            if (!st)
                answer(j, "exited", "the process ended during the request");
            else if (st == 'T' || st == 't')
                answer(j, "stopped", "stopped (SIGSTOP) during the request: "
                       "no Python stack");
            else
                answer(j, "no_answer", "no answer within %.1f s: the rank "
                       "is %s and did not run its stack handler (a program "
                       "that replaced the handler of signal %d, or a thread "
                       "that blocks signals everywhere)", waited,
                       st == 'D' ? "in uninterruptible sleep (D)"
                                 : "alive", ss_stack_signal());
        }
        if (j->native_running) {
            snprintf(j->native_err, sizeof j->native_err,
                     "no native stack within %.1f s", waited);
            uv_process_kill(&j->proc, SIGKILL);
        }
    }
}

static void take_memory(request *q);

static void on_poll(uv_timer_t *t)
{
    ss_stack_collector *c = t->data;
    request *q = c->running;
    if (!q)
        return;
    take_memory(q);
    for (size_t i = 0; i < q->n; i++) {
        rank_job *j = &q->ranks[i];
        if (!j->state && j->signalled && read_answer(j))
            continue;
    }
    uint32_t deadline = q->opt.deadline_ms ? q->opt.deadline_ms
                                           : SS_STACK_DEADLINE_MS_DEFAULT;
    if (now_ms() - q->started_ms >= deadline)
        deadline_passed(q);
    /* 1 ms while only the reading from memory or the source lines are
     * awaited (each takes about a millisecond); 5 ms while a rank answers
     * the signal or a native helper unwinds */
    int fast = !native_pending(q);
    for (size_t i = 0; fast && i < q->n; i++)
        fast = q->ranks[i].state || q->ranks[i].reading;
    uint64_t every = fast ? FAST_POLL_MS : POLL_MS;
    if (uv_timer_get_repeat(t) != every)
        uv_timer_start(t, on_poll, every, every);
    maybe_finish(q);
}

/* ---- the native helper ---- */

static void on_native_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h;
    (void)hint;
    static char chunk[65536];
    buf->base = chunk;
    buf->len = sizeof chunk;
}

static void on_native_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    rank_job *j = s->data;
    if (n > 0) {
        if (j->native.len + (size_t)n > SS_STACK_MAX_NATIVE)
            j->native_cut = 1;
        else
            ss_buf_add(&j->native, buf->base, (size_t)n);
        return;
    }
    if (n == 0)
        return;
    /* EOF or error: the helper is done.  Its exit is not waited for: the
     * launcher reaps every child of ours that is not a rank (launcher.c,
     * strays), so libuv may never see it. */
    j->pipe_open = 0;
    uv_close((uv_handle_t *)&j->out, on_handle_closed);
    if (j->native_running) {
        j->native_running = 0;
        uv_close((uv_handle_t *)&j->proc, on_handle_closed);
    }
    maybe_finish(j->req);
}

static void on_native_exit(uv_process_t *p, int64_t status, int sig)
{
    rank_job *j = p->data;
    if ((status || sig) && !j->native_err[0])
        snprintf(j->native_err, sizeof j->native_err,
                 "the native-stack helper ended with %s %d",
                 sig ? "signal" : "status", sig ? sig : (int)status);
    if (j->native_running) {
        j->native_running = 0;
        uv_close((uv_handle_t *)p, on_handle_closed);
    }
    maybe_finish(j->req);
}

static void start_native(request *q, rank_job *j)
{
    ss_stack_collector *c = q->c;
    char pid[24];
    snprintf(pid, sizeof pid, "%d", (int)j->pid);
    char *args[] = {c->exe, "__native-stack", pid, NULL};
    uv_pipe_init(c->loop, &j->out, 0);
    j->out.data = j;
    q->open_handles++;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
         .data.stream = (uv_stream_t *)&j->out},
        {.flags = UV_IGNORE},
    };
    uv_process_options_t o = {.exit_cb = on_native_exit, .file = c->exe,
                              .args = args, .stdio_count = 3,
                              .stdio = stdio};
    j->proc.data = j;
    int rc = uv_spawn(c->loop, &j->proc, &o);
    if (rc != 0) {
        snprintf(j->native_err, sizeof j->native_err,
                 "cannot start the native-stack helper: %s", uv_strerror(rc));
        /* uv_spawn's handle must be closed even on failure. */
        q->open_handles++;
        uv_close((uv_handle_t *)&j->proc, on_handle_closed);
        uv_close((uv_handle_t *)&j->out, on_handle_closed);
        return;
    }
    q->open_handles++;
    j->native_running = 1;
    j->pipe_open = 1;
    uv_read_start((uv_stream_t *)&j->out, on_native_alloc, on_native_read);
}

/* ---- requests ---- */

/* Asks rank J for its Python stacks with the stack signal: its memory
 * could not be read (J->mem_why says why, "" when it was not tried). */
static void ask_by_signal(rank_job *j)
{
    char st = j->pid > 0 ? proc_state(j->pid) : 0;
    const char *mw = j->mem_why;
    const char *sep = mw[0] ? " (reading its memory: " : "";
    const char *end = mw[0] ? ")" : "";
    if (!st || st == 'Z' || st == 'X') {
        answer(j, "exited", "the rank's process has exited");
        return;
    }
    /* not its state now: our native helper may be unwinding it (then
     * the signal waits until it detaches) */
    if (j->was_stopped) {
        answer(j, "stopped", "stopped (SIGSTOP): no Python stack%s%s%s",
               sep, mw, end);
        return;
    }
    /* The file exists only once the rank's handler is registered
     * (_stacks.py renames it into place), and the handler's process
     * holds it open: never send the signal to a process that would
     * die of it. */
    int fd = open_stack_file(j->file, O_WRONLY);
    if (fd >= 0 && ftruncate(fd, 0) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        answer(j, "no_answer", "no answer: the rank does not load "
               "stepscope's Python module (no stack handler; auto mode "
               "or `import stepscope` installs it)%s%s%s", sep, mw, end);
        return;
    }
    close(fd);
    if (!holds_file(j->pid, j->file)) {
        answer(j, "no_answer", "no answer: the rank's process does not "
               "hold its stack file open (stepscope was loaded by "
               "another process, or the rank ran another program "
               "since): not signalled%s%s%s", sep, mw, end);
        return;
    }
    int sig = ss_stack_signal();
    if (kill(j->pid, sig) != 0) {
        answer(j, errno == ESRCH ? "exited" : "no_answer", "signal %d: %s",
               sig, strerror(errno));
        return;
    }
    j->via = "signal";
    j->signalled = 1;
}

/* Takes up what the reading from memory found for the ranks still
 * waiting for it: their stacks, or the signal instead (the reading
 * failed, or has taken SS_STACK_MEMORY_MS, SS_STACK_MEMORY_NATIVE_MS with
 * native frames, or a third of the deadline). */
static void take_memory(request *q)
{
    uint32_t deadline = q->opt.deadline_ms ? q->opt.deadline_ms
                                           : SS_STACK_DEADLINE_MS_DEFAULT;
    /* the native helpers (a process per rank) compete for the CPU */
    uint32_t most = q->opt.native ? SS_STACK_MEMORY_NATIVE_MS
                                  : SS_STACK_MEMORY_MS;
    uint32_t budget = deadline / 3 < most ? deadline / 3 : most;
    int late = now_ms() - q->started_ms >= budget;
    for (size_t i = 0; i < q->n; i++) {
        rank_job *j = &q->ranks[i];
        if (j->reading && j->state) /* answered meanwhile (closing) */
            j->reading = 0;
        if (!j->reading)
            continue;
        const char *threads = NULL, *why = NULL;
        const ss_stack_memory_leaf *lv = NULL;
        size_t len = 0, nl = 0;
        int st = ss_stack_memory_result(q->memory, i, &threads, &len, &lv,
                                        &nl, &why);
        if (st == 0 && !late && !q->c->closing)
            continue;
        j->reading = 0;
        if (st == 1) {
            ss_buf_add(&j->threads, threads, len);
            for (size_t k = 0; k < nl; k++)
                on_leaf(j, lv[k].file, lv[k].line, lv[k].at);
            j->via = "memory";
            if (j->was_stopped) /* the state that matters */
                answer(j, "stopped", "stopped (SIGSTOP): its Python stack "
                       "read from its memory");
            else
                answer(j, "ok", NULL);
            continue;
        }
        snprintf(j->mem_why, sizeof j->mem_why, "%s",
                 st < 0 && why ? why : "no answer in time");
        if (q->c->closing)
            answer(j, "no_answer", "the controller is closing");
        else
            ask_by_signal(j);
    }
}

static void start_request(ss_stack_collector *c, request *q)
{
    c->running = q;
    q->started_ms = now_ms();
    pid_t *pids = calloc(q->n, sizeof *pids);
    size_t nread = 0;
    for (size_t i = 0; i < q->n; i++) {
        rank_job *j = &q->ranks[i];
        char st = j->pid > 0 ? proc_state(j->pid) : 0;
        if (!st || st == 'Z' || st == 'X') {
            answer(j, "exited", "the rank's process has exited");
            continue;
        }
        j->was_stopped = st == 'T' || st == 't';
        j->reading = 1;
        if (pids)
            pids[i] = j->pid;
        nread++;
    }
    /* Every rank is read from memory first (stack_memory.h); the signal
     * goes only to those that cannot be. */
    q->memory = nread && pids ? ss_stack_memory_start(pids, q->n) : NULL;
    free(pids);
    /* the helpers after the reader: spawning many takes a while */
    for (size_t i = 0; q->opt.native && i < q->n; i++)
        if (q->ranks[i].reading)
            start_native(q, &q->ranks[i]);
    for (size_t i = 0; !q->memory && i < q->n; i++)
        if (q->ranks[i].reading) {
            q->ranks[i].reading = 0;
            snprintf(q->ranks[i].mem_why, sizeof q->ranks[i].mem_why,
                     "no reader thread");
            ask_by_signal(&q->ranks[i]);
        }
    uint64_t every = q->memory ? FAST_POLL_MS : POLL_MS;
    uv_timer_start(&c->poll, on_poll, every, every);
    maybe_finish(q);
}

static void start_next(ss_stack_collector *c)
{
    if (c->running || !c->queue_head)
        return;
    request *q = c->queue_head;
    c->queue_head = q->next;
    if (!c->queue_head)
        c->queue_tail = NULL;
    c->queued--;
    start_request(c, q);
}

ss_stack_collector *ss_stack_collector_new(uv_loop_t *loop, const char *exe,
                                           const char *host)
{
    ss_stack_collector *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->loop = loop;
    c->exe = strdup(exe ? exe : "stepscope");
    c->host = strdup(host ? host : "localhost");
    if (!c->exe || !c->host) {
        free(c->exe);
        free(c->host);
        free(c);
        return NULL;
    }
    uv_timer_init(loop, &c->poll);
    c->poll.data = c;
    return c;
}

int ss_stack_collect(ss_stack_collector *c, const ss_stack_target *targets,
                     size_t n, const ss_stack_options *opt,
                     ss_stack_done_cb cb, void *ctx)
{
    if (!c || !targets || !n || n > SS_STACK_MAX_TARGETS || !cb || c->closing)
        return -EINVAL;
    if (c->running && c->queued >= SS_STACK_MAX_PENDING)
        return -EBUSY;
    request *q = calloc(1, sizeof *q);
    if (!q)
        return -ENOMEM;
    q->ranks = calloc(n, sizeof *q->ranks);
    if (!q->ranks) {
        free(q);
        return -ENOMEM;
    }
    q->c = c;
    q->n = n;
    q->cb = cb;
    q->ctx = ctx;
    if (opt)
        q->opt = *opt;
    for (size_t i = 0; i < n; i++) {
        rank_job *j = &q->ranks[i];
        j->req = q;
        j->rank = targets[i].rank;
        j->pid = targets[i].pid;
        j->file = strdup(targets[i].stack_file ? targets[i].stack_file : "");
        if (!j->file) {
            request_free(q);
            return -ENOMEM;
        }
    }
    if (c->running) {
        if (c->queue_tail)
            c->queue_tail->next = q;
        else
            c->queue_head = q;
        c->queue_tail = q;
        c->queued++;
        return 0;
    }
    start_request(c, q);
    return 0;
}

static void on_poll_closed(uv_handle_t *h)
{
    ss_stack_collector *c = h->data;
    c->poll_closed = 1;
    free_if_done(c);
}

void ss_stack_collector_close(ss_stack_collector *c)
{
    if (!c)
        return;
    c->closing = 1;
    /* Waiting requests are answered as they stand: nobody was asked. */
    while (c->queue_head) {
        request *q = c->queue_head;
        c->queue_head = q->next;
        for (size_t i = 0; i < q->n; i++)
            answer(&q->ranks[i], "no_answer", "the controller is closing");
        q->finishing = 1;
        deliver(q);
    }
    c->queue_tail = NULL;
    if (c->running) {
        request *q = c->running;
        for (size_t i = 0; i < q->n; i++) {
            if (!q->ranks[i].state)
                answer(&q->ranks[i], "no_answer", "the controller is closing");
            rank_job *j = &q->ranks[i];
            if (j->native_running) {
                uv_process_kill(&j->proc, SIGKILL);
                j->native_running = 0;
                uv_close((uv_handle_t *)&j->proc, on_handle_closed);
            }
            if (j->pipe_open) {
                j->pipe_open = 0;
                uv_close((uv_handle_t *)&j->out, on_handle_closed);
            }
        }
        maybe_finish(q);
    }
    uv_timer_stop(&c->poll);
    uv_close((uv_handle_t *)&c->poll, on_poll_closed);
}
