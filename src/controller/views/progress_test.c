/*
 * progress_test.c - the progress line: drawn and erased on a terminal (a
 * pseudo-terminal here), silent on a pipe and for TERM=dumb, rate-limited.
 */
#include "progress.h"
#include "clocks.h"
#include "testing.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Reads what is waiting on FD (non-blocking) into OUT. */
static size_t drain(int fd, char *out, size_t cap)
{
    size_t len = 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (len + 1 < cap && poll(&pfd, 1, 50) > 0) {
        ssize_t n = read(fd, out + len, cap - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    out[len] = '\0';
    return len;
}

static void draws_and_erases_on_a_terminal(void)
{
    int master, slave;
    REQUIRE(openpty(&master, &slave, NULL, NULL, NULL) == 0);
    FILE *tty = fdopen(slave, "w");
    REQUIRE(tty != NULL);
    setenv("TERM", "xterm", 1);
    ss_progress p;
    ss_progress_begin(&p, tty, "reading steps", 10);
    p.delay_ns = 0;
    ss_progress_update(&p, 5);
    char buf[4096];
    drain(master, buf, sizeof buf);
    CHECK(strstr(buf, "\rreading steps 5/10\033[K") != NULL);
    /* Within the redraw interval nothing more is written (the test's own
     * waits do not count: the last draw is made to look recent). */
    p.drawn_ns = ss_mono_now();
    ss_progress_update(&p, 6);
    CHECK_EQ_INT(drain(master, buf, sizeof buf), 0);
    /* A tick redraws only when due. */
    p.drawn_ns = ss_mono_now();
    ss_progress_tick(&p);
    CHECK_EQ_INT(drain(master, buf, sizeof buf), 0);
    p.drawn_ns -= 1000000000;
    ss_progress_tick(&p);
    drain(master, buf, sizeof buf);
    CHECK(strstr(buf, "reading steps 6/10") != NULL);
    /* A new stage shows at once, and the end erases the line. */
    ss_progress_stage(&p, "writing events", 3, 0);
    drain(master, buf, sizeof buf);
    CHECK(strstr(buf, "writing events 3\033[K") != NULL);
    ss_progress_end(&p);
    drain(master, buf, sizeof buf);
    CHECK_STR(buf, "\r\033[K");
    fclose(tty);
    close(master);
}

static void quiet_before_the_delay(void)
{
    int master, slave;
    REQUIRE(openpty(&master, &slave, NULL, NULL, NULL) == 0);
    FILE *tty = fdopen(slave, "w");
    REQUIRE(tty != NULL);
    setenv("TERM", "xterm", 1);
    ss_progress p;
    ss_progress_begin(&p, tty, "quick", 3);
    for (uint64_t i = 1; i <= 3; i++)
        ss_progress_update(&p, i);
    ss_progress_end(&p);
    char buf[256];
    CHECK_EQ_INT(drain(master, buf, sizeof buf), 0);
    fclose(tty);
    close(master);
}

static void silent_on_a_pipe_and_a_dumb_terminal(void)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    FILE *w = fdopen(fds[1], "w");
    REQUIRE(w != NULL);
    ss_progress p;
    ss_progress_begin(&p, w, "reading", 100);
    p.delay_ns = 0;
    for (uint64_t i = 0; i <= 5000; i++)
        ss_progress_update(&p, i);
    ss_progress_stage(&p, "writing", 1, 2);
    ss_progress_end(&p);
    fflush(w);
    char buf[256];
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    CHECK(read(fds[0], buf, sizeof buf) <= 0);
    fclose(w);
    close(fds[0]);

    int master, slave;
    REQUIRE(openpty(&master, &slave, NULL, NULL, NULL) == 0);
    FILE *tty = fdopen(slave, "w");
    REQUIRE(tty != NULL);
    setenv("TERM", "dumb", 1);
    ss_progress_begin(&p, tty, "reading", 10);
    p.delay_ns = 0;
    ss_progress_update(&p, 4);
    ss_progress_end(&p);
    CHECK_EQ_INT(drain(master, buf, sizeof buf), 0);
    fclose(tty);
    close(master);
}

TEST_LIST(TEST(draws_and_erases_on_a_terminal), TEST(quiet_before_the_delay),
          TEST(silent_on_a_pipe_and_a_dumb_terminal))
