/*
 * cli_args.c - what the command front-ends share in reading their command
 * lines (cli_args.h).
 */
#include "cli_args.h"

int ss_cli_option_value(const char *cmd, int argc, char **argv, int *i,
                        const char **out, FILE *err)
{
    if (*i + 1 >= argc || !argv[*i + 1][0]) {
        fprintf(err, "stepscope %s: %s needs a value\n", cmd, argv[*i]);
        return 2;
    }
    *out = argv[++*i];
    return 0;
}
