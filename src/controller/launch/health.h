/*
 * health.h - a node's health checks before an attempt's ranks start
 * (docs/fault-tolerance.md, "Health checks").
 *
 * Built in: free disk space where checkpoints are written (--checkpoint-dir,
 * --min-free-gb); the GPUs NVML sees, none with uncorrected ECC or Xid
 * errors (skipped, with a note, without NVML); the master port free (a
 * bind test, node 0 only).  And the site's own --health-check CMD, run by
 * /bin/sh -c with a timeout, its output captured (the last
 * SS_HEALTH_OUTPUT_MAX bytes), a non-zero exit or the timeout a failure.
 * The checks run in that order and stop at the first failure.
 *
 * ss_health_start runs them on a libuv loop: the built-in checks are quick
 * system calls made at once, the command is a child process watched by the
 * loop; the callback is called once, on the loop, with the result.
 * ss_health_run does the same on a private loop and returns when done.
 */
#ifndef STEPSCOPE_HEALTH_H
#define STEPSCOPE_HEALTH_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define SS_HEALTH_MIN_FREE_GB_DEFAULT 1.0
#define SS_HEALTH_TIMEOUT_MS_DEFAULT 60000
#define SS_HEALTH_OUTPUT_MAX 4096  /* LINK_MAX_TAIL: fits a HEALTH frame */

typedef struct {
    const char *checkpoint_dir; /* NULL: the working directory */
    double min_free_gb;         /* below this is a failure; 0: no check */
    int gpus;                   /* check the GPUs (NVML or AMD SMI) */
    const char *nvml_lib;       /* NULL: nvml.h's default; AMD SMI is
                                   found as gpu_backend.h says */
    uint16_t master_port;       /* 0: no bind test (not node 0, or the
                                   launcher picks a free port) */
    const char *command;        /* --health-check; NULL: none */
    uint32_t timeout_ms;        /* for COMMAND; 0: the default */
} ss_health_config;

typedef struct {
    int ok;
    char check[32];   /* the failing check ("disk", "gpu", "master_port",
                         "command"); "" when ok */
    char output[SS_HEALTH_OUTPUT_MAX + 1]; /* what it found or printed */
    char notes[512];  /* what passed or was skipped, "; "-separated */
    int interrupted;  /* ss_health_run: the signal (SIGINT, SIGTERM,
                         SIGHUP) that stopped the command, 0: none */
} ss_health_result;

/* Fills CFG with the defaults: the working directory, 1 GB, GPUs checked,
 * no port, no command. */
void ss_health_config_defaults(ss_health_config *cfg);

/* The built-in checks, one by one: 0 with a note appended to OUT->notes,
 * or -1 with OUT->ok 0, OUT->check and OUT->output set. */
int ss_health_check_disk(const char *dir, double min_free_gb,
                         ss_health_result *out);
int ss_health_check_gpus(const char *nvml_lib, ss_health_result *out);
int ss_health_check_port(uint16_t port, ss_health_result *out);

typedef void (*ss_health_done)(void *ctx, const ss_health_result *res);

/* Runs every check of CFG (copied; its strings must outlive the run) on
 * LOOP, then DONE(CTX, result) once on the loop.  Returns 0, or -1 with
 * ERR when it could not start (then DONE is never called). */
int ss_health_start(uv_loop_t *loop, const ss_health_config *cfg,
                    ss_health_done done, void *ctx, char *err, size_t errlen);

/* Runs every check of CFG to the end on a private loop.  Returns 0 when
 * all passed, -1 otherwise, with *OUT filled either way.  SIGINT, SIGTERM
 * or SIGHUP while the command runs kills it at once: -1 with
 * OUT->interrupted the signal (the process's other handlers of it, a
 * libuv loop's, still hear of it). */
int ss_health_run(const ss_health_config *cfg, ss_health_result *out);

#endif
