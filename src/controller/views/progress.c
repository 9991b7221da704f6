/*
 * progress.c - the updating progress line (progress.h).
 *
 * The line is drawn as "\r<text>\033[K" (carriage return, the text, erase
 * to the end of the line) and erased with "\r\033[K", so a shorter line
 * never leaves the tail of a longer one and the cursor ends where the line
 * began.  Drawing is rate-limited by the monotonic clock; the clock is
 * read only when a redraw could be due, at most every 1024 updates, so a
 * loop may call ss_progress_update for every row it reads.
 */
#include "progress.h"
#include "clocks.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000LL

static int is_terminal(FILE *out)
{
    if (!out || !isatty(fileno(out)))
        return 0;
    const char *term = getenv("TERM");
    return !term || strcmp(term, "dumb") != 0;
}

static void draw(ss_progress *p, int64_t now)
{
    char line[192];
    int n;
    if (p->total)
        n = snprintf(line, sizeof line, "%s %llu/%llu", p->what,
                     (unsigned long long)p->done,
                     (unsigned long long)p->total);
    else
        n = snprintf(line, sizeof line, "%s %llu", p->what,
                     (unsigned long long)p->done);
    if (n < 0)
        return;
    fprintf(p->out, "\r%s\033[K", line);
    fflush(p->out);
    p->drawn_ns = now;
}

/* Draws when the delay has passed and the last draw is old enough. */
static void maybe_draw(ss_progress *p)
{
    int64_t now = ss_mono_now();
    if (now - p->start_ns < p->delay_ns)
        return;
    if (p->drawn_ns && now - p->drawn_ns < SS_PROGRESS_EVERY_MS * MS)
        return;
    draw(p, now);
}

void ss_progress_begin(ss_progress *p, FILE *out, const char *what,
                       uint64_t total)
{
    memset(p, 0, sizeof *p);
    p->out = is_terminal(out) ? out : NULL;
    snprintf(p->what, sizeof p->what, "%s", what ? what : "");
    p->total = total;
    p->start_ns = ss_mono_now();
    p->delay_ns = SS_PROGRESS_DELAY_MS * MS;
}

void ss_progress_update(ss_progress *p, uint64_t done)
{
    uint64_t before = p->done;
    p->done = done;
    /* Look at the clock only every 1024 units, or when the count jumps. */
    if (p->out && (done >> 10 != before >> 10 || done - before > 1))
        maybe_draw(p);
}

void ss_progress_stage(ss_progress *p, const char *what, uint64_t done,
                       uint64_t total)
{
    snprintf(p->what, sizeof p->what, "%s", what ? what : "");
    p->done = done;
    p->total = total;
    if (p->out) {
        p->drawn_ns = 0; /* a new label shows at once once the delay passed */
        maybe_draw(p);
    }
}

void ss_progress_tick(ss_progress *p)
{
    if (p->out)
        maybe_draw(p);
}

void ss_progress_end(ss_progress *p)
{
    if (p->out && p->drawn_ns) {
        fputs("\r\033[K", p->out);
        fflush(p->out);
    }
    p->drawn_ns = 0;
}
