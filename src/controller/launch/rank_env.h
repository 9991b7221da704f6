/*
 * rank_env.h - the STEPSCOPE_* environment a rank gets from whoever
 * launches it: the controller on its own node, an agent on the others.
 *
 * STEPSCOPE_ADDR (the local socket the rank connects to), STEPSCOPE_TOKEN
 * and STEPSCOPE_RUN_ID (what its HELLO must carry), PYTHONPATH with the
 * stepscope package after what the user's holds (so that a script's
 * `import stepscope` works), and for --auto the PYTHONPATH that puts
 * stepscope's sitecustomize and package first plus
 * STEPSCOPE_AUTO=1, an empty STEPSCOPE_AUTO_PID (each rank claims it;
 * python/stepscope/_autoload/sitecustomize.py) and STEPSCOPE_NUMERICS
 * (off, light or full: python/stepscope/_numerics.py).  The replica
 * options (STEPSCOPE_CHECKSUM_EVERY, STEPSCOPE_CHECKSUM,
 * STEPSCOPE_REPLICA_GROUPS: python/stepscope/_checksum.py) and, after a
 * restart on a replica divergence, STEPSCOPE_DIVERGED_AT, when set.
 * Every node builds its ranks' environment from the same command line,
 * so every rank of a multi-node run sees the same options
 * (docs/consistency.md).
 */
#ifndef STEPSCOPE_RANK_ENV_H
#define STEPSCOPE_RANK_ENV_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* The longest --replica-groups text a rank's environment carries. */
#define SS_RANK_ENV_MAX_GROUPS 4096

typedef struct {
    char addr[PATH_MAX + 32];
    char token[64];
    char run[80];
    char pythonpath[3 * PATH_MAX];
    char auto_on[20];
    char auto_pid[24];
    char stack_dir[PATH_MAX + 32];
    char numerics[40];
    char checksum_every[48];
    char checksum[40];
    char replica_groups[SS_RANK_ENV_MAX_GROUPS + 32];
    char diverged_at[48];
    int auto_mode;
    char *env[16]; /* NULL-terminated, for ss_launch_config.env */
} ss_rank_env;

/* The replica-consistency options of `stepscope run` as its ranks get
 * them (docs/consistency.md); NULL leaves a variable out. */
typedef struct {
    const char *checksum_every; /* STEPSCOPE_CHECKSUM_EVERY: N or auto */
    const char *checksum;       /* STEPSCOPE_CHECKSUM: params|optimizer */
    const char *replica_groups; /* STEPSCOPE_REPLICA_GROUPS: "0,1;2-3" */
} ss_replica_opts;

/*
 * Fills E for ranks connecting to the unix socket SOCK_PATH with TOKEN and
 * RUN_UUID, writing their stacks on request into STACK_DIR
 * (STEPSCOPE_STACK_DIR, docs/debug.md); the Python package found beside
 * the stepscope executable EXE (<exe dir>/python, <exe dir>/../python or
 * <exe dir>/../lib/stepscope/python) goes on PYTHONPATH after the
 * inherited entries (none when it is not there); AUTO_MODE adds the
 * --auto entries and puts its sitecustomize and the package first, and
 * needs the package.  Returns 0, or -1 with a reason in ERR.
 */
int ss_rank_env_build(ss_rank_env *e, const char *exe, const char *sock_path,
                      const char *stack_dir,
                      const uint8_t token[WIRE_TOKEN_SIZE],
                      const char *run_uuid, int auto_mode, char *err,
                      size_t errlen);

/* Sets STEPSCOPE_NUMERICS to MODE ("off", "light" or "full"; "light"
 * after ss_rank_env_build) for the ranks launched from now on with E's
 * environment; only --auto ranks get it. */
void ss_rank_env_set_numerics(ss_rank_env *e, const char *mode);

/* Sets the replica options O (NULL: none) for the ranks launched from now
 * on with E's environment, --auto or not.  Returns 0, or -1 when a value
 * is longer than E holds (SS_RANK_ENV_MAX_GROUPS for the groups). */
int ss_rank_env_set_replica(ss_rank_env *e, const ss_replica_opts *o);

/* Sets STEPSCOPE_DIVERGED_AT to STEP, the step of the replica divergence
 * that ended the attempt before, for the ranks launched from now on; a
 * negative STEP removes it. */
void ss_rank_env_set_diverged_at(ss_rank_env *e, int64_t step);

/* The stepscope executable's path into OUT.  Returns 0, or -1 with a
 * reason in ERR. */
int ss_rank_env_self_exe(char *out, size_t outlen, char *err, size_t errlen);

#endif
