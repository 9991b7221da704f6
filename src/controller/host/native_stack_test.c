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
#include "testing_proc.h"

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
    if (!testing_wait_proc_state(pid, 'S'))
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
    CHECK(testing_wait_proc_state(pid, 'S'));
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
        CHECK(testing_wait_proc_state(pid, 'T'));
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
