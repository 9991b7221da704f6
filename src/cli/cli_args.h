/*
 * cli_args.h - what the command front-ends share in reading their command
 * lines: an option's value, with the one usage error when it has none.
 */
#ifndef STEPSCOPE_CLI_ARGS_H
#define STEPSCOPE_CLI_ARGS_H

#include <stdio.h>

/*
 * Reads the value of the option ARGV[*I] (the next argument) into *OUT and
 * moves *I past it.  Returns 0, or 2 (the usage exit status) after printing
 * "stepscope CMD: OPTION needs a value" to ERR when there is no next
 * argument or it is empty; *OUT and *I are then left as they are.
 */
int ss_cli_option_value(const char *cmd, int argc, char **argv, int *i,
                        const char **out, FILE *err);

#endif
