/*
 * nodeconf_test.c - Slurm host lists expand as Slurm expands them (ranges,
 * padding, several groups, plain lists) and malformed ones are refused
 * with a reason; node settings follow the precedence flags > Slurm >
 * PET_* > defaults, each field remembering its origin; bad values are
 * refused naming the flag or variable.
 */
#include "nodeconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing.h"

/* Expands LIST and checks it gives exactly the space-separated WANT. */
static int expands_to(const char *list, const char *want)
{
    char err[256] = "";
    size_t n = 0;
    char **hosts = ss_hostlist_expand(list, 0, &n, err, sizeof err);
    if (!hosts) {
        fprintf(stderr, "  '%s': %s\n", list, err);
        return 0;
    }
    char got[4096] = "";
    size_t count = 0;
    for (char **h = hosts; *h; h++, count++) {
        if (got[0])
            strcat(got, " ");
        strcat(got, *h);
    }
    ss_hostlist_free(hosts);
    if (strcmp(got, want) != 0 || count != n) {
        fprintf(stderr, "  '%s' -> '%s' (%zu), expected '%s'\n", list, got, n,
                want);
        return 0;
    }
    return 1;
}

/* LIST is refused with an error containing WANT. */
static int refused(const char *list, size_t max, const char *want)
{
    char err[256] = "";
    char **hosts = ss_hostlist_expand(list, max, NULL, err, sizeof err);
    if (hosts) {
        ss_hostlist_free(hosts);
        fprintf(stderr, "  '%s' was accepted\n", list);
        return 0;
    }
    if (!strstr(err, want)) {
        fprintf(stderr, "  '%s': error '%s' lacks '%s'\n", list, err, want);
        return 0;
    }
    return 1;
}

static void hostlist_plain_names(void)
{
    CHECK(expands_to("node01", "node01"));
    CHECK(expands_to("host1,host2", "host1 host2"));
    CHECK(expands_to("a.example.com,b-2.example.com",
                     "a.example.com b-2.example.com"));
}

static void hostlist_ranges_and_padding(void)
{
    CHECK(expands_to("node[01-04,07]", "node01 node02 node03 node04 node07"));
    CHECK(expands_to("n[8-11]", "n8 n9 n10 n11"));
    CHECK(expands_to("n[08-11]", "n08 n09 n10 n11"));
    CHECK(expands_to("n[098-101]", "n098 n099 n100 n101"));
    CHECK(expands_to("n[5]", "n5"));
    CHECK(expands_to("n[007]", "n007"));
    CHECK(expands_to("[1-2]", "1 2"));
}

static void hostlist_suffix_and_several_items(void)
{
    CHECK(expands_to("a[1-3]b,c", "a1b a2b a3b c"));
    CHECK(expands_to("c,a[1-2]", "c a1 a2"));
    CHECK(expands_to("x[1-2],y[3,5]z", "x1 x2 y3z y5z"));
}

static void hostlist_groups_are_a_cartesian_product(void)
{
    CHECK(expands_to("rack[1-2]-node[01-02]",
                     "rack1-node01 rack1-node02 rack2-node01 rack2-node02"));
    CHECK(expands_to("r[1-2]n[1,3]s[0-1]",
                     "r1n1s0 r1n1s1 r1n3s0 r1n3s1 r2n1s0 r2n1s1 r2n3s0 r2n3s1"));
}

static void hostlist_rejects_malformed(void)
{
    CHECK(refused("", 0, "empty host list"));
    CHECK(refused("node[1-2", 0, "'[' without ']'"));
    CHECK(refused("node1-2]", 0, "']' without '['"));
    CHECK(refused("node[1-[2]]", 0, "nested"));
    CHECK(refused("node[]", 0, "empty bracket group"));
    CHECK(refused("node[3-1]", 0, "reversed range 3-1"));
    CHECK(refused("node[a-b]", 0, "not a number"));
    CHECK(refused("node[1-]", 0, "upper bound"));
    CHECK(refused("node[1,]", 0, "trailing ','"));
    CHECK(refused("node[1;2]", 0, "unexpected ';'"));
    CHECK(refused("a,,b", 0, "empty host name"));
    CHECK(refused(",a", 0, "empty host name"));
    CHECK(refused("a,", 0, "empty host name"));
    CHECK(refused("a b", 0, "white space"));
    CHECK(refused("node[1234567890-1234567891]", 0, "at most 9 digits"));
}

static void hostlist_is_bounded(void)
{
    CHECK(refused("node[0-999999999]", 0, "more than 65536 hosts"));
    CHECK(refused("a[1-300]b[1-300]", 0, "more than 65536 hosts"));
    CHECK(refused("a[1-3]", 2, "more than 2 hosts"));
    CHECK(refused("a,b,c", 2, "more than 2 hosts"));
    char err[256];
    size_t n = 0;
    char **h = ss_hostlist_expand("a[1-3]", 3, &n, err, sizeof err);
    CHECK(h && n == 3);
    ss_hostlist_free(h);
    ss_hostlist_free(NULL);
    char name[300];
    memset(name, 'x', 255);
    strcpy(name + 255, "[1-2]");
    CHECK(refused(name, 0, "longer than 255 bytes"));
    name[255] = '\0';
    size_t one = 0;
    h = ss_hostlist_expand(name, 0, &one, err, sizeof err);
    CHECK(h && one == 1);
    ss_hostlist_free(h);
}

/* ---- resolving ---- */

static ss_node_conf conf;
static char rerr[512];

static int resolve(const ss_node_flags *f, char **envp)
{
    rerr[0] = '\0';
    return ss_nodeconf_resolve(f, envp, &conf, rerr, sizeof rerr);
}

/* torchrun's rendezvous: its endpoint names node 0 across nodes (its
 * port the master's with the static backend, the controller's with
 * c10d), a backend that numbers the nodes itself needs a node rank, and
 * one node ignores it. */
static void torchruns_rendezvous_names_node_0(void)
{
    ss_node_flags st = {.nnodes = "2", .node_rank = "1",
                        .rdzv_endpoint = "node0:29400", .nproc_per_node = "2"};
    REQUIRE(resolve(&st, NULL) == 0);
    CHECK_STR(conf.master_addr, "node0");
    CHECK_STR(conf.master_addr_from.what, "--rdzv-endpoint");
    CHECK_EQ_INT(conf.master_port, 29400);
    CHECK_EQ_INT(conf.controller_port, 29401);

    ss_node_flags c10d = st;
    c10d.rdzv_backend = "c10d";
    c10d.rdzv_id = "job9";
    REQUIRE(resolve(&c10d, NULL) == 0);
    CHECK_STR(conf.master_addr, "node0");
    CHECK_EQ_INT(conf.controller_port, 29400);
    CHECK_STR(conf.controller_port_from.what, "--rdzv-endpoint");
    CHECK_EQ_INT(conf.master_port, 29500);
    CHECK_STR(conf.job_id, "job9");
    c10d.job_id = "given";
    c10d.rdzv_endpoint = "node0:29500";
    REQUIRE(resolve(&c10d, NULL) == 0);
    CHECK_EQ_INT(conf.controller_port, 29500);
    CHECK_EQ_INT(conf.master_port, 29501);
    CHECK_STR(conf.master_port_from.what, "controller port + 1");
    CHECK_STR(conf.job_id, "given");
    c10d.master_port = "29500";
    CHECK(resolve(&c10d, NULL) != 0);
    CHECK(strstr(rerr, "--rdzv-endpoint 29500 is the master port") != NULL);
    c10d.master_port = NULL;
    c10d.rdzv_endpoint = "[fd00::1]:29400";
    REQUIRE(resolve(&c10d, NULL) == 0);
    CHECK_STR(conf.master_addr, "fd00::1");
    CHECK_EQ_INT(conf.controller_port, 29400);
    c10d.rdzv_endpoint = "node0"; /* no port: the defaults */
    REQUIRE(resolve(&c10d, NULL) == 0);
    CHECK_EQ_INT(conf.master_port, 29500);
    CHECK_EQ_INT(conf.controller_port, 29501);
    c10d.master_addr = "10.1.1.1"; /* the flag beats the endpoint */
    REQUIRE(resolve(&c10d, NULL) == 0);
    CHECK_STR(conf.master_addr, "10.1.1.1");

    /* c10d numbers the nodes as they join; etcd cannot */
    ss_node_flags joined = {.nnodes = "2", .rdzv_backend = "c10d",
                            .rdzv_endpoint = "node0:29400"};
    REQUIRE(resolve(&joined, NULL) == 0);
    CHECK_EQ_INT(conf.node_rank, SS_NODECONF_RANK_AT_JOIN);
    CHECK_EQ_INT(conf.node_rank_from.source, SS_NODE_FROM_JOIN);
    char line[512];
    ss_nodeconf_describe(&conf, line, sizeof line);
    CHECK(strstr(line, "a node of 2 (node rank from the controller, as the "
                 "node joins, 2 nodes from --nnodes), master node0:29500 ")
          == line);
    ss_node_flags etcd = {.nnodes = "2", .node_rank = "0",
                          .rdzv_backend = "etcd",
                          .rdzv_endpoint = "etcd.example:2379"};
    CHECK(resolve(&etcd, NULL) != 0);
    CHECK(strstr(rerr, "need the master's address") != NULL);
    etcd.node_rank = NULL;
    CHECK(resolve(&etcd, NULL) != 0);
    CHECK(strstr(rerr, "--rdzv-backend etcd: the nodes meet at node 0's "
                 "controller, not at an etcd server") != NULL);

    const char *bad[] = {"node0:99999", ":29400", "[::1", "[]:1", "node0:x",
                         "no de:1", NULL};
    for (const char **b = bad; *b; b++) {
        ss_node_flags f = {.nnodes = "2", .node_rank = "1",
                           .rdzv_endpoint = *b};
        CHECK(resolve(&f, NULL) != 0);
        CHECK(strstr(rerr, "--rdzv-endpoint") != NULL);
    }
    ss_node_flags zk = {.rdzv_backend = "zookeeper"};
    CHECK(resolve(&zk, NULL) != 0);
    CHECK(strstr(rerr, "backends are static, c10d, etcd and etcd-v2") != NULL);

    /* one node: accepted and unused, port 0 too */
    ss_node_flags one = {.nnodes = "1", .rdzv_backend = "c10d",
                         .rdzv_endpoint = "localhost:0"};
    REQUIRE(resolve(&one, NULL) == 0);
    CHECK_EQ_INT(conf.nnodes, 1);
    CHECK_EQ_INT(conf.master_port, 0);
    CHECK_STR(conf.master_addr, "127.0.0.1");

    /* an elastic job's variables, and a malformed one unused by one node */
    char *pet[] = {"PET_NNODES=2", "PET_NODE_RANK=1",
                   "PET_RDZV_ENDPOINT=trainer-0:23456",
                   "PET_RDZV_BACKEND=c10d", NULL};
    REQUIRE(resolve(NULL, pet) == 0);
    CHECK_STR(conf.master_addr, "trainer-0");
    CHECK_STR(conf.master_addr_from.what, "PET_RDZV_ENDPOINT");
    CHECK_EQ_INT(conf.controller_port, 23456);
    char *unused[] = {"PET_RDZV_ENDPOINT=::bad::[", NULL};
    REQUIRE(resolve(NULL, unused) == 0);
}

static void defaults_are_one_node_and_a_free_port(void)
{
    char *env[] = {"PATH=/bin", NULL};
    REQUIRE(resolve(NULL, env) == 0);
    CHECK_EQ_INT(conf.nnodes, 1);
    CHECK_EQ_INT(conf.node_rank, 0);
    CHECK_EQ_INT(conf.nproc_per_node, 0);
    CHECK_STR(conf.master_addr, "127.0.0.1");
    CHECK_EQ_INT(conf.master_port, 0);
    CHECK_EQ_INT(conf.controller_port, 0);
    CHECK_STR(conf.job_id, "");
    CHECK_EQ_INT(conf.nnodes_from.source, SS_NODE_FROM_DEFAULT);
    CHECK_EQ_INT(conf.master_addr_from.source, SS_NODE_FROM_DEFAULT);
    char line[256];
    ss_nodeconf_describe(&conf, line, sizeof line);
    CHECK_STR(line, "single node, master port chosen at start");
    REQUIRE(resolve(NULL, NULL) == 0);
    CHECK_EQ_INT(conf.nnodes, 1);
}

static void flags_alone(void)
{
    ss_node_flags f = {.nnodes = "2", .node_rank = "1",
                       .master_addr = "10.0.0.5", .master_port = "1234",
                       .nproc_per_node = "8", .job_id = "exp7"};
    REQUIRE(resolve(&f, NULL) == 0);
    CHECK_EQ_INT(conf.nnodes, 2);
    CHECK_EQ_INT(conf.node_rank, 1);
    CHECK_EQ_INT(conf.nproc_per_node, 8);
    CHECK_STR(conf.master_addr, "10.0.0.5");
    CHECK_EQ_INT(conf.master_port, 1234);
    CHECK_EQ_INT(conf.controller_port, 1235);
    CHECK_STR(conf.job_id, "exp7");
    CHECK_EQ_INT(conf.nnodes_from.source, SS_NODE_FROM_FLAG);
    CHECK_STR(conf.node_rank_from.what, "--node-rank");
    CHECK_EQ_INT(conf.controller_port_from.source, SS_NODE_FROM_DERIVED);
    char line[512];
    ss_nodeconf_describe(&conf, line, sizeof line);
    CHECK_STR(line, "node 1 of 2 (node rank from --node-rank, 2 nodes from "
              "--nnodes), master 10.0.0.5:1234 (address from --master-addr, "
              "port from --master-port), controller port 1235 (master port "
              "+ 1), job exp7 (--job-id)");
}

static char *slurm_env[] = {
    "SLURM_JOB_ID=4242", "SLURM_NNODES=4", "SLURM_NODEID=2",
    "SLURM_JOB_NODELIST=gpu[07-08,11],gpu20", "SLURM_NTASKS_PER_NODE=8",
    "SLURM_GPUS_ON_NODE=8", NULL};

static void slurm_alone(void)
{
    ss_node_flags f = {.nproc_per_node = "8"};
    REQUIRE(resolve(&f, slurm_env) == 0);
    CHECK_EQ_INT(conf.nnodes, 4);
    CHECK_EQ_INT(conf.node_rank, 2);
    CHECK_STR(conf.master_addr, "gpu07");
    CHECK_EQ_INT(conf.master_port, 29500);
    CHECK_EQ_INT(conf.controller_port, 29501);
    CHECK_STR(conf.job_id, "4242");
    CHECK_STR(conf.nnodes_from.what, "SLURM_NNODES");
    CHECK_STR(conf.node_rank_from.what, "SLURM_NODEID");
    CHECK_STR(conf.master_addr_from.what, "first host of SLURM_JOB_NODELIST");
    CHECK_EQ_INT(conf.master_port_from.source, SS_NODE_FROM_DEFAULT);
    CHECK_EQ_INT(conf.job_id_from.source, SS_NODE_FROM_SLURM);
    char line[512];
    ss_nodeconf_describe(&conf, line, sizeof line);
    CHECK_STR(line, "node 2 of 4 (node rank from SLURM_NODEID, 4 nodes from "
              "SLURM_NNODES), master gpu07:29500 (address from first host of "
              "SLURM_JOB_NODELIST, port from default), controller port 29501 "
              "(master port + 1), job 4242 (SLURM_JOB_ID)");
}

static void slurm_ntasks_and_gpus_are_not_ranks_per_node(void)
{
    REQUIRE(resolve(NULL, slurm_env) == 0);
    CHECK_EQ_INT(conf.nproc_per_node, 0);
}

static void slurm_older_names(void)
{
    char *env[] = {"SLURM_JOB_ID=7", "SLURM_JOB_NUM_NODES=2",
                   "SLURM_NODEID=0", "SLURM_NODELIST=cn[100-101]", NULL};
    REQUIRE(resolve(NULL, env) == 0);
    CHECK_EQ_INT(conf.nnodes, 2);
    CHECK_STR(conf.nnodes_from.what, "SLURM_JOB_NUM_NODES");
    CHECK_STR(conf.master_addr, "cn100");
    CHECK_STR(conf.master_addr_from.what, "first host of SLURM_NODELIST");
}

static void slurm_single_node_job_is_ignored(void)
{
    /* salloc -N1: a one-node run stays as it always was. */
    char *env[] = {"SLURM_JOB_ID=7", "SLURM_NNODES=1", "SLURM_NODEID=0",
                   "SLURM_JOB_NODELIST=cn5", NULL};
    REQUIRE(resolve(NULL, env) == 0);
    CHECK_EQ_INT(conf.nnodes, 1);
    CHECK_STR(conf.master_addr, "127.0.0.1");
    CHECK_EQ_INT(conf.master_port, 0);
    CHECK_STR(conf.job_id, "");
    /* ...unless --nnodes asks for more than one node. */
    char *env2[] = {"SLURM_JOB_ID=7", "SLURM_NNODES=1", "SLURM_NODEID=0",
                    "SLURM_JOB_NODELIST=cn5", NULL};
    ss_node_flags f = {.nnodes = "2"};
    REQUIRE(resolve(&f, env2) == 0);
    CHECK_EQ_INT(conf.nnodes, 2);
    CHECK_STR(conf.master_addr, "cn5");
    CHECK_STR(conf.job_id, "7");
}

static void slurm_variables_without_a_job_are_ignored(void)
{
    char *env[] = {"SLURM_NNODES=4", "SLURM_NODEID=2",
                   "SLURM_JOB_NODELIST=gpu[1-4]", NULL};
    REQUIRE(resolve(NULL, env) == 0);
    CHECK_EQ_INT(conf.nnodes, 1);
    CHECK_STR(conf.master_addr, "127.0.0.1");
}

static char *pet_env[] = {
    "PET_NNODES=3", "PET_NODE_RANK=1", "PET_MASTER_ADDR=job-master-0",
    "PET_MASTER_PORT=23456", "PET_NPROC_PER_NODE=4", "PET_RDZV_ID=pj",
    /* what a v1 PyTorchJob or a parent launcher sets: never read */
    "MASTER_ADDR=elsewhere", "MASTER_PORT=1111", "RANK=9", "WORLD_SIZE=12",
    "NODE_RANK=5", NULL};

static void pet_alone(void)
{
    REQUIRE(resolve(NULL, pet_env) == 0);
    CHECK_EQ_INT(conf.nnodes, 3);
    CHECK_EQ_INT(conf.node_rank, 1);
    CHECK_STR(conf.master_addr, "job-master-0");
    CHECK_EQ_INT(conf.master_port, 23456);
    CHECK_EQ_INT(conf.controller_port, 23457);
    CHECK_EQ_INT(conf.nproc_per_node, 4);
    CHECK_STR(conf.job_id, "pj");
    CHECK_STR(conf.nnodes_from.what, "PET_NNODES");
    CHECK_STR(conf.nproc_from.what, "PET_NPROC_PER_NODE");
    CHECK_EQ_INT(conf.master_addr_from.source, SS_NODE_FROM_PET);
}

static void plain_torch_variables_are_ignored(void)
{
    char *env[] = {"MASTER_ADDR=elsewhere", "MASTER_PORT=1111", "RANK=1",
                   "WORLD_SIZE=2", "NODE_RANK=1", "LOCAL_RANK=0", NULL};
    REQUIRE(resolve(NULL, env) == 0);
    CHECK_EQ_INT(conf.nnodes, 1);
    CHECK_EQ_INT(conf.node_rank, 0);
    CHECK_STR(conf.master_addr, "127.0.0.1");
    CHECK_EQ_INT(conf.master_port, 0);
}

static void flags_beat_slurm_and_pet(void)
{
    char *env[] = {"SLURM_JOB_ID=4242", "SLURM_NNODES=4", "SLURM_NODEID=2",
                   "SLURM_JOB_NODELIST=gpu[07-10]", "PET_NNODES=3",
                   "PET_NODE_RANK=1", "PET_MASTER_ADDR=pm",
                   "PET_MASTER_PORT=23456", "PET_NPROC_PER_NODE=4",
                   "PET_RDZV_ID=pj", NULL};
    ss_node_flags f = {.nnodes = "2:2", .node_rank = "0",
                       .master_addr = "m", .master_port = "5000",
                       .controller_port = "6000", .nproc_per_node = "2",
                       .job_id = "j"};
    REQUIRE(resolve(&f, env) == 0);
    CHECK_EQ_INT(conf.nnodes, 2);
    CHECK_EQ_INT(conf.node_rank, 0);
    CHECK_STR(conf.master_addr, "m");
    CHECK_EQ_INT(conf.master_port, 5000);
    CHECK_EQ_INT(conf.controller_port, 6000);
    CHECK_EQ_INT(conf.nproc_per_node, 2);
    CHECK_STR(conf.job_id, "j");
    CHECK_EQ_INT(conf.nnodes_from.source, SS_NODE_FROM_FLAG);
    CHECK_EQ_INT(conf.node_rank_from.source, SS_NODE_FROM_FLAG);
    CHECK_EQ_INT(conf.master_addr_from.source, SS_NODE_FROM_FLAG);
    CHECK_EQ_INT(conf.master_port_from.source, SS_NODE_FROM_FLAG);
    CHECK_EQ_INT(conf.controller_port_from.source, SS_NODE_FROM_FLAG);
    CHECK_EQ_INT(conf.nproc_from.source, SS_NODE_FROM_FLAG);
    CHECK_EQ_INT(conf.job_id_from.source, SS_NODE_FROM_FLAG);
}

static void slurm_beats_pet_field_by_field(void)
{
    char *env[] = {"SLURM_JOB_ID=4242", "SLURM_NNODES=4", "SLURM_NODEID=2",
                   "SLURM_JOB_NODELIST=gpu[07-10]", "PET_NNODES=3",
                   "PET_NODE_RANK=1", "PET_MASTER_ADDR=pm",
                   "PET_MASTER_PORT=23456", "PET_NPROC_PER_NODE=4",
                   "PET_RDZV_ID=pj", NULL};
    ss_node_flags f = {.node_rank = "3"};
    REQUIRE(resolve(&f, env) == 0);
    CHECK_EQ_INT(conf.nnodes, 4);                    /* Slurm */
    CHECK_EQ_INT(conf.node_rank, 3);                 /* flag */
    CHECK_STR(conf.master_addr, "gpu07");            /* Slurm */
    CHECK_EQ_INT(conf.master_port, 23456);           /* PET: Slurm has none */
    CHECK_EQ_INT(conf.master_port_from.source, SS_NODE_FROM_PET);
    CHECK_EQ_INT(conf.nproc_per_node, 4);            /* PET */
    CHECK_STR(conf.job_id, "4242");                  /* Slurm */
    CHECK_EQ_INT(conf.nnodes_from.source, SS_NODE_FROM_SLURM);
    CHECK_EQ_INT(conf.master_addr_from.source, SS_NODE_FROM_SLURM);
}

static void overridden_sources_are_not_parsed(void)
{
    /* A broken node list does not matter when --master-addr is given. */
    char *env[] = {"SLURM_JOB_ID=1", "SLURM_NNODES=2", "SLURM_NODEID=0",
                   "SLURM_JOB_NODELIST=bad[", "PET_NNODES=x", NULL};
    ss_node_flags f = {.master_addr = "h0"};
    REQUIRE(resolve(&f, env) == 0);
    CHECK_STR(conf.master_addr, "h0");
    /* Without it, the node list is at fault. */
    CHECK(resolve(NULL, env) == -1);
    CHECK(strstr(rerr, "SLURM_JOB_NODELIST: 'bad[': '[' without ']'") != NULL);
}

static void empty_values_count_as_unset(void)
{
    char *env[] = {"PET_NNODES=", "PET_MASTER_ADDR=", NULL};
    REQUIRE(resolve(NULL, env) == 0);
    CHECK_EQ_INT(conf.nnodes, 1);
}

/* Resolving F over ENV fails with an error containing WANT. */
static int fails(const ss_node_flags *f, char **env, const char *want)
{
    if (resolve(f, env) == 0) {
        fprintf(stderr, "  accepted, expected '%s'\n", want);
        return 0;
    }
    if (!strstr(rerr, want)) {
        fprintf(stderr, "  error '%s' lacks '%s'\n", rerr, want);
        return 0;
    }
    return 1;
}

static void rejects_bad_values(void)
{
    ss_node_flags f;
#define WITH(...) (f = (ss_node_flags){__VA_ARGS__}, &f)
    CHECK(fails(WITH(.nnodes = "1:4", .master_addr = "m"), NULL,
                "--nnodes 1:4: elastic ranges (MIN:MAX) are not supported"));
    CHECK(fails(WITH(.nnodes = "0"), NULL, "--nnodes 0: not a number"));
    CHECK(fails(WITH(.nnodes = "two"), NULL, "--nnodes two: not a number"));
    CHECK(fails(WITH(.nnodes = "2:"), NULL, "--nnodes 2:: not a number"));
    CHECK(fails(WITH(.nnodes = "4097", .master_addr = "m"), NULL,
                "at most 4096 nodes"));
    CHECK(fails(WITH(.nnodes = "2", .node_rank = "2", .master_addr = "m"), NULL,
                "--node-rank 2 is not below the number of nodes (2, from "
                "--nnodes)"));
    CHECK(fails(WITH(.node_rank = "1"), NULL,
                "--node-rank 1 is not below the number of nodes (1, from "
                "default)"));
    CHECK(fails(WITH(.node_rank = "-1"), NULL, "a node rank must be"));
    CHECK(fails(WITH(.master_port = "0"), NULL,
                "--master-port 0: a port must be a number 1..65535"));
    CHECK(fails(WITH(.master_port = "65536"), NULL, "1..65535"));
    CHECK(fails(WITH(.controller_port = "70000"), NULL,
                "--controller-port 70000: a port"));
    CHECK(fails(WITH(.master_port = "5000", .controller_port = "5000"), NULL,
                "--controller-port 5000 is the master port"));
    CHECK(fails(WITH(.master_port = "65535"), NULL,
                "leaves no master port + 1"));
    CHECK(fails(WITH(.nnodes = "2"), NULL,
                "2 nodes (from --nnodes) need the master's address"));
    CHECK(fails(WITH(.master_addr = "a b"), NULL,
                "--master-addr a b: not a host name"));
    CHECK(fails(WITH(.nproc_per_node = "0"), NULL, "-n 0: ranks per node"));
    CHECK(fails(WITH(.job_id = "a b"), NULL, "--job-id a b: a job id"));
    char *pet_auto[] = {"PET_NPROC_PER_NODE=auto", NULL};
    CHECK(fails(NULL, pet_auto, "PET_NPROC_PER_NODE=auto: ranks per node "
                "must be a number of at least 1 (give -n N)"));
    CHECK(resolve(WITH(.nproc_per_node = "2"), pet_auto) == 0);
    char *pet_elastic[] = {"PET_NNODES=1:3", "PET_MASTER_ADDR=m", NULL};
    CHECK(fails(NULL, pet_elastic, "PET_NNODES=1:3: elastic ranges"));
    char *pet_rank[] = {"PET_NNODES=2", "PET_NODE_RANK=2",
                        "PET_MASTER_ADDR=m", NULL};
    CHECK(fails(NULL, pet_rank, "PET_NODE_RANK=2 is not below the number of "
                "nodes (2, from PET_NNODES)"));
    char *slurm_rank[] = {"SLURM_JOB_ID=1", "SLURM_NNODES=2",
                          "SLURM_NODEID=5", "SLURM_NODELIST=a,b", NULL};
    CHECK(fails(NULL, slurm_rank, "SLURM_NODEID=5 is not below"));
    char *slurm_list[] = {"SLURM_JOB_ID=1", "SLURM_NNODES=2",
                          "SLURM_NODEID=0", "SLURM_JOB_NODELIST=n[9-2]", NULL};
    CHECK(fails(NULL, slurm_list,
                "SLURM_JOB_NODELIST: 'n[9-2]': reversed range 9-2"));
    char *pet_port[] = {"PET_MASTER_PORT=http", NULL};
    CHECK(fails(NULL, pet_port, "PET_MASTER_PORT=http: a port"));
#undef WITH
}

static void a_given_master_gets_the_default_port(void)
{
    /* one node, but a master address given: no free port picked here */
    ss_node_flags f = {.master_addr = "10.0.0.1"};
    REQUIRE(resolve(&f, NULL) == 0);
    CHECK_EQ_INT(conf.master_port, 29500);
    CHECK_EQ_INT(conf.controller_port, 29501);
    char *env[] = {"PET_MASTER_ADDR=m", NULL};
    REQUIRE(resolve(NULL, env) == 0);
    CHECK_EQ_INT(conf.master_port, 29500);
}

static void accepts_limits(void)
{
    ss_node_flags f = {.nnodes = "4096", .node_rank = "4095",
                       .master_addr = "m", .master_port = "65534"};
    REQUIRE(resolve(&f, NULL) == 0);
    CHECK_EQ_INT(conf.nnodes, 4096);
    CHECK_EQ_INT(conf.controller_port, 65535);
    ss_node_flags g = {.master_port = "65535", .controller_port = "1"};
    REQUIRE(resolve(&g, NULL) == 0);
    CHECK_EQ_INT(conf.controller_port, 1);
    /* one node with a port given: the describe line says so */
    ss_node_flags h = {.master_port = "7000"};
    REQUIRE(resolve(&h, NULL) == 0);
    char line[512];
    size_t need = ss_nodeconf_describe(&conf, line, sizeof line);
    CHECK_EQ_INT(need, strlen(line));
    CHECK_STR(line, "node 0 of 1 (node rank from default, 1 node from "
              "default), master 127.0.0.1:7000 (address from default, port "
              "from --master-port), controller port 7001 (master port + 1)");
    char small[8];
    CHECK_EQ_INT(ss_nodeconf_describe(&conf, small, sizeof small), need);
    CHECK_EQ_INT(strlen(small), 7);
}

TEST_LIST(TEST(hostlist_plain_names), TEST(hostlist_ranges_and_padding),
          TEST(hostlist_suffix_and_several_items),
          TEST(hostlist_groups_are_a_cartesian_product),
          TEST(hostlist_rejects_malformed), TEST(hostlist_is_bounded),
          TEST(defaults_are_one_node_and_a_free_port), TEST(flags_alone),
          TEST(slurm_alone), TEST(slurm_ntasks_and_gpus_are_not_ranks_per_node),
          TEST(slurm_older_names), TEST(slurm_single_node_job_is_ignored),
          TEST(slurm_variables_without_a_job_are_ignored), TEST(pet_alone),
          TEST(plain_torch_variables_are_ignored),
          TEST(flags_beat_slurm_and_pet), TEST(slurm_beats_pet_field_by_field),
          TEST(overridden_sources_are_not_parsed),
          TEST(empty_values_count_as_unset), TEST(rejects_bad_values),
          TEST(a_given_master_gets_the_default_port),
          TEST(accepts_limits),
          TEST(torchruns_rendezvous_names_node_0))
