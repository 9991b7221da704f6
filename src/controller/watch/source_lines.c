/*
 * source_lines.c - lines of source files read off the loop
 * (source_lines.h).
 *
 * One detached thread per set of lines.  The set is shared by the caller
 * and the reader through a count of holders; whichever lets go last frees
 * it, so a caller that stopped waiting never waits for the reader.  The
 * reader sorts the wanted lines by file and reads each file once.
 */
#include "source_lines.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ss_source_lines {
    atomic_int holders; /* the caller and the reader */
    atomic_int done;
    size_t n;
    char **files;
    long *lines;
    char **text;        /* written by the reader before done */
};

typedef struct {
    const char *file;
    long line;
    size_t index;
} want;

static atomic_int readers_alive;

static void free_lines(ss_source_lines *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->files)
            free(s->files[i]);
        if (s->text)
            free(s->text[i]);
    }
    free(s->files);
    free(s->lines);
    free(s->text);
    free(s);
}

static void let_go(ss_source_lines *s)
{
    if (atomic_fetch_sub_explicit(&s->holders, 1, memory_order_acq_rel) == 1)
        free_lines(s);
}

static int wanted(const char *file, long line)
{
    size_t fl = strlen(file);
    return line > 0 && line <= SS_SOURCE_MAX_LINE && fl >= 3 &&
           strcmp(file + fl - 3, ".py") == 0;
}

static char *trimmed(const char *t, size_t len)
{
    while (len && (*t == ' ' || *t == '\t')) {
        t++;
        len--;
    }
    while (len && (t[len - 1] == '\r' || t[len - 1] == ' ' ||
                   t[len - 1] == '\t'))
        len--;
    return len ? strndup(t, len) : NULL; /* a blank line: nothing to show */
}

/* Reads the lines W[0..N) want (one file, lines ascending) from that
 * file when it is a regular one, at most SS_SOURCE_MAX_BYTES of it. */
static void read_file(ss_source_lines *s, const want *w, size_t n)
{
    int fd = open(w[0].file, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return;
    }
    char buf[8192], text[SS_SOURCE_MAX_TEXT];
    size_t k = 0, tl = 0, total = 0;
    long at = 1;
    ssize_t got = 0;
    while (k < n && total < SS_SOURCE_MAX_BYTES) {
        got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        total += (size_t)got;
        for (ssize_t b = 0; b < got && k < n; b++) {
            if (buf[b] != '\n') {
                if (at == w[k].line && tl < sizeof text)
                    text[tl++] = buf[b];
                continue;
            }
            /* the end of line AT: every index that wants it gets it */
            while (k < n && w[k].line == at)
                s->text[w[k++].index] = trimmed(text, tl);
            tl = 0;
            at++;
        }
    }
    if (got == 0) /* the last line, without a line end */
        while (k < n && w[k].line == at && tl)
            s->text[w[k++].index] = trimmed(text, tl);
    close(fd);
}

static int by_file_line(const void *a, const void *b)
{
    const want *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

static void *reader(void *arg)
{
    ss_source_lines *s = arg;
    want *w = malloc(s->n * sizeof *w);
    size_t m = 0;
    for (size_t i = 0; w && i < s->n; i++)
        if (wanted(s->files[i], s->lines[i]))
            w[m++] = (want){s->files[i], s->lines[i], i};
    qsort(w, m, sizeof *w, by_file_line);
    for (size_t a = 0; a < m;) {
        size_t b = a + 1;
        while (b < m && strcmp(w[a].file, w[b].file) == 0)
            b++;
        read_file(s, w + a, b - a);
        a = b;
    }
    free(w);
    atomic_store_explicit(&s->done, 1, memory_order_release);
    atomic_fetch_sub(&readers_alive, 1);
    let_go(s);
    return NULL;
}

ss_source_lines *ss_source_lines_start(const char *const *files,
                                       const long *lines, size_t n)
{
    if (!n || !files || !lines)
        return NULL;
    ss_source_lines *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->n = n;
    s->files = calloc(n, sizeof *s->files);
    s->lines = calloc(n, sizeof *s->lines);
    s->text = calloc(n, sizeof *s->text);
    int ok = s->files && s->lines && s->text;
    for (size_t i = 0; ok && i < n; i++) {
        s->files[i] = strdup(files[i] ? files[i] : "");
        s->lines[i] = lines[i];
        ok = s->files[i] != NULL;
    }
    if (!ok) {
        free_lines(s);
        return NULL;
    }
    if (atomic_fetch_add(&readers_alive, 1) >= SS_SOURCE_MAX_READERS) {
        atomic_fetch_sub(&readers_alive, 1);
        free_lines(s);
        return NULL;
    }
    atomic_init(&s->holders, 2);
    atomic_init(&s->done, 0);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256u << 10);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the reader takes none */
    pthread_t th;
    int rc = pthread_create(&th, &attr, reader, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_fetch_sub(&readers_alive, 1);
        free_lines(s);
        return NULL;
    }
    return s;
}

int ss_source_lines_done(const ss_source_lines *s)
{
    return s && atomic_load_explicit(&s->done, memory_order_acquire);
}

const char *ss_source_lines_get(const ss_source_lines *s, size_t i)
{
    if (!ss_source_lines_done(s) || i >= s->n)
        return NULL;
    return s->text[i];
}

void ss_source_lines_release(ss_source_lines *s)
{
    if (s)
        let_go(s);
}
