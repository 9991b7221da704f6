/*
 * cmd_native_stack.c - the hidden command `stepscope __native-stack PID...`
 * (commands.h), which the controller runs as a helper process of its own
 * for `stacks --native` (host/native_stack.h says why): checks the process
 * ids, then host/native_stack.h prints each one's native stacks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "native_stack.h"

int ss_cmd_native_stack(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: stepscope " SS_NATIVE_STACK_ARG " PID...\n");
        return 2;
    }
    pid_t *pids = malloc((size_t)(argc - 1) * sizeof *pids);
    if (!pids) {
        fprintf(stderr, "stepscope " SS_NATIVE_STACK_ARG ": out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        char *end;
        errno = 0;
        long pid = strtol(argv[i], &end, 10);
        if (errno || *end || pid <= 0 || pid > 0x7fffffff) {
            fprintf(stderr, "stepscope " SS_NATIVE_STACK_ARG
                    ": not a process id: %s\n", argv[i]);
            free(pids);
            return 2;
        }
        pids[i - 1] = (pid_t)pid;
    }
    ss_native_stack_print(pids, (size_t)(argc - 1), stdout);
    free(pids);
    return 0;
}
