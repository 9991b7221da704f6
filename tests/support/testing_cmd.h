/*
 * testing_cmd.h - runs one `stepscope` command front-end (src/cli/
 * commands.h: int ss_cmd_NAME(int argc, char **argv)) inside a test and
 * captures what it writes.
 *
 * The front-ends write to stdout and stderr, so the command runs in a
 * forked child whose file descriptors 1 and 2 are temporary files; the
 * parent copies both into the caller's streams and returns the child's
 * exit status.  Files and stores the command writes are the real ones.
 * Header-only, like testing.h.
 */
#ifndef STEPSCOPE_TESTING_CMD_H
#define STEPSCOPE_TESTING_CMD_H

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*testing_cmd_fn)(int argc, char **argv);

/* Copies the rest of FROM (rewound) to TO (NULL: drops it). */
static inline void testing_cmd_copy_(FILE *from, FILE *to)
{
    char buf[8192];
    size_t n;
    rewind(from);
    while ((n = fread(buf, 1, sizeof buf, from)) > 0)
        if (to)
            fwrite(buf, 1, n, to);
    fclose(from);
}

/*
 * Runs CMD(ARGC, ARGV) in a child; what it wrote to stdout goes to OUT,
 * what it wrote to stderr to ERR (either may be NULL, or the same stream:
 * then stdout's text comes first).  Returns the command's exit status,
 * or -1 when it could not be run or did not exit normally.
 */
static inline int testing_cmd_run(testing_cmd_fn cmd, int argc, char **argv,
                                  FILE *out, FILE *err)
{
    FILE *o = tmpfile(), *e = tmpfile();
    if (!o || !e) {
        if (o)
            fclose(o);
        if (e)
            fclose(e);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fileno(o), 1);
        dup2(fileno(e), 2);
        int rc = cmd(argc, argv);
        fflush(NULL);
        _exit(rc);
    }
    int status = 0;
    int ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status);
    testing_cmd_copy_(o, out);
    testing_cmd_copy_(e, err);
    return ok ? WEXITSTATUS(status) : -1;
}

#endif
