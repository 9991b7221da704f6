/*
 * native_stack_test.c - unit tests for native_stack.c on real processes:
 * a child asleep in nanosleep is unwound through libc's symbols and keeps
 * running afterwards; a stopped child is unwound and stays stopped; a pid
 * that does not exist gives an error, not threads.
 */
#include "native_stack.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testing.h"

static char state_of(pid_t pid)
{
    char path[64], buf[512] = "";
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p ? p[2] : 0;
}

/* Waits (20 s at most) for PID to be in STATE.  A fixed wait was too
 * short for a child that a loaded machine schedules late. */
static int wait_state(pid_t pid, char state)
{
    for (int waited = 0; waited < 20000; waited += 5) {
        if (state_of(pid) == state)
            return 1;
        usleep(5000);
    }
    return 0;
}

static pid_t spawn_sleeper(void)
{
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        for (;;) {
            struct timespec ts = {100, 0};
            nanosleep(&ts, NULL);
        }
    }
    /* into nanosleep, the only place where it sleeps */
    if (!wait_state(pid, 'S'))
        fprintf(stderr, "  the child never went to sleep\n");
    return pid;
}

static void running_child(void)
{
    pid_t pid = spawn_sleeper();
    ss_buf b = {0};
    CHECK_EQ_INT(ss_native_stack_json(pid, &b), 0);
    char head[64];
    snprintf(head, sizeof head, "{\"pid\":%d,\"threads\":[{\"tid\":%d,",
             (int)pid, (int)pid);
    CHECK(strncmp(b.data, head, strlen(head)) == 0);
    CHECK(strstr(b.data, "nanosleep") != NULL);
    CHECK(strstr(b.data, "\"module\":\"libc.so.6\"") != NULL);
    CHECK(strstr(b.data, "\"error\"") == NULL);
    /* detached: it sleeps on (the kernel may first let it run, and a
     * loaded machine may run it late) */
    CHECK(wait_state(pid, 'S'));
    ss_buf_free(&b);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void stopped_child(void)
{
    pid_t pid = spawn_sleeper();
    kill(pid, SIGSTOP);
    int st;
    REQUIRE(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
    ss_buf b = {0};
    for (int i = 0; i < 2; i++) { /* twice: the first leaves it as it was */
        ss_buf_reset(&b);
        CHECK_EQ_INT(ss_native_stack_json(pid, &b), 0);
        CHECK(strstr(b.data, "nanosleep") != NULL);
        /* libdw detaches with SIGSTOP: the kernel resumes it and stops
         * it again on the way back to user mode (briefly state R). */
        CHECK(wait_state(pid, 'T'));
    }
    ss_buf_free(&b);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void no_such_process(void)
{
    pid_t pid = spawn_sleeper();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ss_buf b = {0};
    CHECK_EQ_INT(ss_native_stack_json(pid, &b), -1);
    CHECK(strstr(b.data, "\"error\":") != NULL);
    CHECK(strstr(b.data, "\"threads\":[]}") != NULL);
    ss_buf_free(&b);
}

TEST_LIST(TEST(running_child), TEST(stopped_child), TEST(no_such_process))
