/*
 * nodeconf.h - where a multi-node run's node settings come from.
 *
 * `stepscope run` is started once per node, like torchrun.  Each start
 * must know how many nodes there are, which one it is, where node 0 (the
 * master, which runs the controller) listens, and how many ranks it starts.
 * This module resolves those settings from three sources, in this order of
 * precedence:
 *
 *   1. the command-line flags (--nnodes, --node-rank, --master-addr,
 *      --master-port, --controller-port, -n, --job-id);
 *   2. Slurm's environment, only when running inside a Slurm job
 *      (SLURM_JOB_ID set) that spans more than one node, or when --nnodes
 *      asks for more than one: SLURM_NNODES (else SLURM_JOB_NUM_NODES),
 *      SLURM_NODEID, the first host of SLURM_JOB_NODELIST (else
 *      SLURM_NODELIST), SLURM_JOB_ID.  SLURM_NTASKS_PER_NODE and
 *      SLURM_GPUS_ON_NODE are never taken as ranks per node: that is -n;
 *   3. torchrun's PET_* variables, as Kubeflow sets them for a PyTorchJob /
 *      TrainJob: PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR,
 *      PET_MASTER_PORT, PET_NPROC_PER_NODE (a number here: the front-end
 *      counts torchrun's words cpu, gpu and auto first), PET_RDZV_ID, and
 *      PET_RDZV_ENDPOINT with PET_RDZV_BACKEND where the master's are not
 *      set (an elastic job's).  torchrun's rendezvous endpoint, flag or
 *      variable, names node 0 only with several nodes and the static or
 *      c10d backend (an etcd endpoint is not a node): its host stands for
 *      the master address just after --master-addr, its port for the
 *      master port (static) or the controller port (c10d, the master port
 *      then its default, or the controller port + 1 where that is taken).
 *      A c10d rendezvous numbers the nodes as they join: without a node
 *      rank from any source, the node rank is SS_NODECONF_RANK_AT_JOIN,
 *      and the front-end decides whether this node is node 0 (the
 *      endpoint's host, or torchrun's is_host) and otherwise leaves the
 *      number to the controller; an etcd one needs the node rank.  The plain
 *      MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE are ignored, as
 *      torchrun ignores them: they are what a launcher hands its workers
 *      (a stepscope started inside a rank would take its parent's values),
 *      and the training operator's v1 PyTorchJob sets RANK and WORLD_SIZE
 *      per pod (node), not per process;
 *   4. defaults: one node, node rank 0, master 127.0.0.1; master port
 *      29500 (torchrun's) when there is more than one node or a master
 *      address was given, else 0 (the launcher picks a free loopback port,
 *      as single-node runs always did); controller port = master port + 1.
 *
 * Every field remembers where it came from, and ss_nodeconf_describe turns
 * that into the line printed once at start.  The module is pure: the
 * environment is an argument, and nothing is read or written elsewhere.
 */
#ifndef STEPSCOPE_NODECONF_H
#define STEPSCOPE_NODECONF_H

#include <stddef.h>
#include <stdint.h>

#define SS_NODECONF_MAX_NODES 4096
#define SS_NODECONF_DEFAULT_PORT 29500  /* torchrun's --master-port */
#define SS_NODECONF_ADDR_MAX 256        /* host names are at most 255 bytes */
#define SS_NODECONF_JOB_ID_MAX 128
#define SS_HOSTLIST_MAX_HOSTS 65536     /* bound on one expanded host list */
#define SS_NODECONF_RANK_AT_JOIN UINT32_MAX /* c10d: numbered as it joins */

/* The flags as given on the command line: the option's text, or NULL when
 * the flag was not given.  Parsed and checked by ss_nodeconf_resolve. */
typedef struct {
    const char *nnodes;          /* "N" or "N:N" (torchrun's MIN:MAX form
                                    with MIN == MAX); elastic ranges are
                                    rejected */
    const char *node_rank;       /* 0..nnodes-1 */
    const char *master_addr;     /* host name or address of node 0 */
    const char *master_port;     /* 1..65535: the ranks' MASTER_PORT */
    const char *controller_port; /* 1..65535: node 0's controller; default
                                    master port + 1 */
    const char *nproc_per_node;  /* -n: ranks on this node */
    const char *job_id;          /* names the job across nodes (torchrun's
                                    rdzv id); agents present it to the
                                    controller */
    const char *rdzv_endpoint;   /* torchrun's --rdzv-endpoint HOST[:PORT]
                                    ([ADDR]:PORT for IPv6): with several
                                    nodes and the static or c10d backend,
                                    node 0's address; its port is the
                                    master port (static) or the
                                    controller's (c10d) */
    const char *rdzv_backend;    /* static (torchrun's default), c10d,
                                    etcd or etcd-v2; c10d numbers the nodes
                                    as they join, etcd needs a node rank */
    const char *rdzv_id;         /* torchrun's --rdzv-id: the job id when
                                    --job-id is not given */
} ss_node_flags;

/* Where a value came from. */
typedef enum {
    SS_NODE_FROM_DEFAULT = 0,
    SS_NODE_FROM_FLAG,
    SS_NODE_FROM_SLURM,
    SS_NODE_FROM_PET,
    SS_NODE_FROM_DERIVED,  /* computed from another field (port + 1) */
    SS_NODE_FROM_JOIN,     /* the node rank: given by the controller as
                              the node joins (c10d) */
} ss_node_source;

typedef struct {
    ss_node_source source;
    const char *what;  /* static text naming the exact origin, for the
                          start line: "--nnodes", "SLURM_NODEID",
                          "first host of SLURM_JOB_NODELIST", "PET_NNODES",
                          "master port + 1", "default" */
} ss_node_origin;

typedef struct {
    uint32_t nnodes;           /* 1..SS_NODECONF_MAX_NODES */
    uint32_t node_rank;        /* < nnodes, or SS_NODECONF_RANK_AT_JOIN */
    uint32_t nproc_per_node;   /* 0: not given anywhere (the caller asks
                                  for -n) */
    uint16_t master_port;      /* 0 only for one node with neither port
                                  nor master address given: the launcher
                                  picks a free one */
    uint16_t controller_port;  /* 0 exactly when master_port is 0 */
    char master_addr[SS_NODECONF_ADDR_MAX];
    char job_id[SS_NODECONF_JOB_ID_MAX]; /* "" when none */
    ss_node_origin nnodes_from, node_rank_from, nproc_from, master_addr_from,
        master_port_from, controller_port_from, job_id_from;
} ss_node_conf;

/*
 * Resolves the node settings from FLAGS (may be NULL: no flags) and ENVP
 * (a NULL-terminated "NAME=value" array such as environ; may be NULL) into
 * OUT, by the precedence above.  Returns 0, or -1 with a one-line reason in
 * ERR naming the flag or variable at fault, e.g.
 *   "--node-rank 2 is not below the number of nodes (2, from SLURM_NNODES)"
 *   "--nnodes 1:4: elastic ranges are not supported; give one number"
 *   "SLURM_JOB_NODELIST 'node[3-1]': reversed range 3-1"
 * Only the sources that are used are parsed: a malformed variable that a
 * flag overrides is not an error.
 */
int ss_nodeconf_resolve(const ss_node_flags *flags, char *const *envp,
                        ss_node_conf *out, char *err, size_t errlen);

/*
 * Writes the start line for a person into BUF (always NUL-terminated when
 * BUFLEN > 0) and returns the length the full text needs (like snprintf):
 *   "node 1 of 2 (node rank from SLURM_NODEID, 2 nodes from SLURM_NNODES),
 *    master node01:29500 (first host of SLURM_JOB_NODELIST, port default),
 *    controller port 29501 (master port + 1), job 4242 (SLURM_JOB_ID)"
 * on one line, without a trailing newline and without a "stepscope: "
 * prefix.  For a single node with nothing given: "single node, master port
 * chosen at start".
 */
size_t ss_nodeconf_describe(const ss_node_conf *c, char *buf, size_t buflen);

/*
 * Expands a Slurm host list: "node[01-04,07]" -> node01 node02 node03
 * node04 node07; "a[1-3]b,c" -> a1b a2b a3b c; "rack[1-2]-node[01-02]" ->
 * rack1-node01 rack1-node02 rack2-node01 rack2-node02 (several bracket
 * groups give every combination, the leftmost varying slowest); zero
 * padding is kept (the width of the range's first number); "h1,h2" are
 * plain names.  At most MAX_HOSTS names (0: SS_HOSTLIST_MAX_HOSTS).
 * Returns a NULL-terminated array of malloc'd names, the count in *N (may
 * be NULL); free it with ss_hostlist_free.  Returns NULL with a reason in
 * ERR on malformed input (empty list or name, unbalanced or nested
 * brackets, empty group, a bound that is not a number, a reversed range,
 * more than MAX_HOSTS names, a name over 255 bytes) or out of memory.
 */
char **ss_hostlist_expand(const char *list, size_t max_hosts, size_t *n,
                          char *err, size_t errlen);

/* Frees what ss_hostlist_expand returned; NULL is a no-op. */
void ss_hostlist_free(char **hosts);

#endif
