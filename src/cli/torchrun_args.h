/*
 * torchrun_args.h - what a torchrun command line says beyond the options
 * stepscope run shares with torchrun: which of the ranks' output streams
 * go to the console (--redirects, --tee, --local-ranks-filter) and the
 * rendezvous settings stepscope can use (--rdzv-conf's join_timeout).
 * The rendezvous endpoint, backend and id are node settings (nodeconf.h);
 * whether a node hosts a c10d rendezvous is ss_torchrun_is_host's.
 *
 * Pure (values in, values out, errors into a caller's buffer) but for
 * ss_torchrun_is_host, which reads this machine's name and addresses.
 */
#ifndef STEPSCOPE_TORCHRUN_ARGS_H
#define STEPSCOPE_TORCHRUN_ARGS_H

#include <stddef.h>
#include <stdint.h>

/* torchrun's flags that shape the command, the nodes or the console. */
typedef struct {
    int standalone;            /* --standalone: one node */
    int module;                /* -m: CMD is a Python module */
    int no_python;             /* --no-python: CMD.py runs as it is */
    const char *redirects;     /* --redirects SPEC; NULL: not given */
    const char *tee;           /* --tee SPEC; NULL: not given */
    const char *ranks_filter;  /* --local-ranks-filter LIST; NULL: all */
} ss_torchrun_flags;

/*
 * Checks a --redirects or --tee SPEC as torchrun reads it: one number for
 * every local rank, or "RANK:N" pairs joined by ','; N is 0 (none), 1
 * (stdout), 2 (stderr) or 3 (both).  OPT names the option in ERR.
 * Returns 0, or -1 with a one-line reason in ERR.
 */
int ss_torchrun_streams_check(const char *opt, const char *spec, char *err,
                              size_t errlen);

/* Checks a --local-ranks-filter LIST: local ranks joined by ','.
 * Returns 0, or -1 with ERR. */
int ss_torchrun_filter_check(const char *list, char *err, size_t errlen);

/*
 * The console's share of each of NPROCS local ranks' output as TF's
 * checked specs say, torchrun's way: a stream redirected to its log and
 * not teed is not shown, nor a rank outside the filter (stepscope logs
 * both streams of every rank whatever they say).  Returns a malloc'd
 * array of NPROCS masks of SS_ECHO_STDOUT | SS_ECHO_STDERR (launcher.h),
 * or NULL when every stream is shown (or memory ran out: then they are).
 */
uint8_t *ss_torchrun_echo_mask(const ss_torchrun_flags *tf, uint32_t nprocs);

/*
 * Reads --rdzv-conf's "KEY=VALUE" pairs joined by ','.  The ones stepscope
 * uses: join_timeout (seconds a node may take to join) into
 * *JOIN_TIMEOUT_MS, and is_host (whether this node hosts the c10d
 * rendezvous: true, 1, yes... or false, 0, no...) into *IS_HOST (1 or 0),
 * each left alone when absent; the others are torchrun's rendezvous
 * store's and are taken without effect.  Returns 0, or -1 with ERR.
 */
int ss_torchrun_rdzv_conf(const char *conf, uint32_t *join_timeout_ms,
                          int *is_host, char *err, size_t errlen);

/*
 * Whether HOST names this machine, as torchrun's c10d rendezvous decides
 * which node hosts it when is_host is not said: its host name, a loopback
 * address, or an address of one of its interfaces (HOST resolved through
 * getaddrinfo; a name that does not resolve is not this machine).
 */
int ss_torchrun_is_host(const char *host);

#endif
