/*
 * testing_proc.h - waiting for a child process's scheduler state in unit
 * tests.
 *
 * A test that needs a child asleep in a call, or stopped by a signal,
 * waits for that state in /proc instead of sleeping a fixed time: a fixed
 * wait is too short for a child that a loaded machine (or a sanitizer
 * build) schedules late.  Header-only, like testing.h.
 */
#ifndef STEPSCOPE_TESTING_PROC_H
#define STEPSCOPE_TESTING_PROC_H

#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Process PID's state letter (R, S, T...), or 0 when it cannot be read. */
static inline char testing_proc_state(pid_t pid)
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
    return p && p[1] ? p[2] : 0;
}

/* Waits (20 s at most) for PID to be in STATE.  Returns 1 when it is. */
static inline int testing_wait_proc_state(pid_t pid, char state)
{
    for (int waited = 0; waited < 20000; waited += 5) {
        if (testing_proc_state(pid) == state)
            return 1;
        usleep(5000);
    }
    return 0;
}

#endif
