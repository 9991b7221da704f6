/*
 * source_lines_test.c - unit tests for source_lines.c: the lines of
 * regular ".py" files, trimmed, each file read once for several lines;
 * FIFOs, devices behind a ".py" name, other names and lines out of range
 * give none; a caller that lets go before the reader is done does not
 * wait for it; and no more than SS_SOURCE_MAX_READERS readers live at once.
 */
#include "source_lines.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testing.h"
#include "testing_tmp.h"

/* The monotonic clock in ms. */
static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How long a reader may take: reading megabytes under the sanitizers on a
 * loaded machine takes far longer than the few milliseconds it takes
 * otherwise. */
#define READER_WAIT_MS 20000

static void wait_done(const ss_source_lines *s)
{
    int64_t end = now_ms() + READER_WAIT_MS;
    while (!ss_source_lines_done(s) && now_ms() < end)
        usleep(1000);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
}

static void lines_of_regular_files_only(void)
{
    const char *dir = testing_tmp_dir();
    char a[600], b[600], fifo[600], dev[600], txt[600];
    snprintf(a, sizeof a, "%s/a.py", dir);
    snprintf(b, sizeof b, "%s/b.py", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo.py", dir);
    snprintf(dev, sizeof dev, "%s/zero.py", dir);
    snprintf(txt, sizeof txt, "%s/a.txt", dir);
    write_file(a, "one\n\t  two  \r\n\nfour");
    write_file(b, "x = 1\n");
    write_file(txt, "not python\n");
    REQUIRE(mkfifo(fifo, 0600) == 0);
    REQUIRE(symlink("/dev/zero", dev) == 0);
    const char *files[] = {a, b, a, a, fifo, dev, txt, a, a, "/nonexistent.py",
                           a};
    long lines[] = {2, 1, 1, 4, 1, 1, 1, 3, 5, 1, 0};
    size_t n = sizeof lines / sizeof lines[0];
    ss_source_lines *s = ss_source_lines_start(files, lines, n);
    REQUIRE(s);
    wait_done(s);
    REQUIRE(ss_source_lines_done(s));
    const char *want[] = {"two", "x = 1", "one", "four", NULL, NULL, NULL,
                          NULL, NULL, NULL, NULL};
    for (size_t i = 0; i < n; i++) {
        const char *got = ss_source_lines_get(s, i);
        if (want[i])
            CHECK(got && strcmp(got, want[i]) == 0);
        else
            CHECK(got == NULL);
    }
    CHECK(ss_source_lines_get(s, n) == NULL);
    ss_source_lines_release(s);
    ss_source_lines_release(NULL);
    CHECK(ss_source_lines_start(files, lines, 0) == NULL);
}

/* The caller lets go at once, while the reader still reads: nothing
 * waits and nothing leaks (ASan checks the latter). */
static void release_before_done(void)
{
    const char *dir = testing_tmp_dir();
    char big[600];
    snprintf(big, sizeof big, "%s/big.py", dir);
    FILE *f = fopen(big, "w");
    REQUIRE(f);
    for (int i = 0; i < 200000; i++)
        fprintf(f, "line_%d = %d\n", i, i);
    fclose(f);
    const char *files[] = {big, big};
    long lines[] = {99999, 100000};
    for (int round = 0; round < 20; round++) {
        ss_source_lines *s = ss_source_lines_start(files, lines, 2);
        if (!s) { /* SS_SOURCE_MAX_READERS still reading */
            usleep(1000);
            continue;
        }
        ss_source_lines_release(s);
    }
    /* every reader ends; then one reads it all */
    ss_source_lines *s = NULL;
    for (int64_t end = now_ms() + READER_WAIT_MS; !s && now_ms() < end;) {
        s = ss_source_lines_start(files, lines, 2);
        if (!s)
            usleep(1000);
    }
    REQUIRE(s);
    wait_done(s);
    CHECK(ss_source_lines_get(s, 0) &&
          strcmp(ss_source_lines_get(s, 0), "line_99998 = 99998") == 0);
    CHECK(ss_source_lines_get(s, 1) &&
          strcmp(ss_source_lines_get(s, 1), "line_99999 = 99999") == 0);
    ss_source_lines_release(s);
}

/* Readers are bounded: while SS_SOURCE_MAX_READERS still read (here a
 * 3 MB file stands in for a file system that does not answer), the next
 * start answers NULL. */
static void readers_are_bounded(void)
{
    const char *dir = testing_tmp_dir();
    char big[600];
    snprintf(big, sizeof big, "%s/big.py", dir);
    const char *files[] = {big};
    long lines[] = {100000};
    ss_source_lines *held[SS_SOURCE_MAX_READERS + 1] = {0};
    int refused = 0;
    for (int i = 0; i < 200 && !refused; i++) {
        for (size_t k = 0; k <= SS_SOURCE_MAX_READERS; k++)
            if (!held[k]) {
                held[k] = ss_source_lines_start(files, lines, 1);
                refused |= held[k] == NULL;
            }
        for (size_t k = 0; k <= SS_SOURCE_MAX_READERS; k++) {
            ss_source_lines_release(held[k]);
            held[k] = NULL;
        }
    }
    CHECK(refused); /* three started within microseconds: one refused */
}

TEST_LIST(TEST(lines_of_regular_files_only), TEST(release_before_done),
          TEST(readers_are_bounded))
