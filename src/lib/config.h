/*
 * config.h - the recorder's configuration, read from the environment.
 *
 * The controller (`stepscope run`, or torchrun with STEPSCOPE_* exported)
 * tells each rank where to connect and how to introduce itself:
 *
 *   STEPSCOPE_ADDR    unix:/path/to/socket | tcp:IPV4:PORT | tcp:[IPV6]:PORT
 *                     (absent or empty: the recorder stays disabled)
 *   STEPSCOPE_TOKEN   the run's token, 32 hex digits (required with ADDR)
 *   STEPSCOPE_RUN_ID  the run's id (required with ADDR)
 *   RANK, WORLD_SIZE, LOCAL_RANK, TORCHELASTIC_RESTART_COUNT
 *                     decimal; default 0, 1, 0, 0
 *
 * Parsing is separate from getenv() so that it can be tested in isolation.
 */
#ifndef STEPSCOPE_LIB_CONFIG_H
#define STEPSCOPE_LIB_CONFIG_H

#include <stddef.h>
#include <sys/socket.h>

#include "wire.h"

typedef struct {
    struct sockaddr_storage addr; /* where the controller listens */
    socklen_t addr_len;
    char addr_text[WIRE_MAX_STR + 1]; /* STEPSCOPE_ADDR, for messages */
    wire_hello hello; /* everything but pid (filled at connect time) */
} ss__config;

/* Results of ss__config_parse() besides SS_EENV. */
#define SS__CONFIG_ENABLED 0
#define SS__CONFIG_ABSENT 1 /* no STEPSCOPE_ADDR: stay disabled */

/*
 * Fills CFG from the variables that GET returns (getenv, or a test's
 * table).  Returns SS__CONFIG_ENABLED, SS__CONFIG_ABSENT, or SS_EENV with a
 * one-line reason in ERR naming the offending variable.  The host name is
 * taken from gethostname().
 */
int ss__config_parse(ss__config *cfg, char *(*get)(const char *name),
                     char *err, size_t errlen);

#endif
