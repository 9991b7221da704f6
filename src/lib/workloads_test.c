/*
 * workloads_test.c - unit tests for the workload API's checks
 * (workloads.c): the names it builds and refuses, and the placements it
 * refuses, with the recorder disabled (no controller in the environment;
 * the vectors' way to the controller is tested end to end by
 * tests/e2e/test_moe.py and test_embedding.py through the Python API,
 * which records the same names).
 */
#include "stepscope.h"

#include "testing.h"

static void names_are_prefixed(void)
{
    ss_name_id load = ss_expert_layer("3");
    CHECK(load != 0);
    CHECK_EQ_INT(load, ss_name("moe.load.3"));
    CHECK_EQ_INT(ss_embedding_table("items"), ss_name("emb.load.items"));
    CHECK_EQ_INT(ss_expert_layer(""), 0);
    CHECK_EQ_INT(ss_expert_layer(NULL), 0);
    /* 49 bytes fit with "moe.placement.", 50 do not */
    char layer[64];
    memset(layer, 'x', sizeof layer);
    layer[49] = '\0';
    CHECK(ss_expert_layer(layer) != 0);
    layer[49] = 'x';
    layer[50] = '\0';
    CHECK_EQ_INT(ss_expert_layer(layer), 0);
}

static void bad_placements_are_refused(void)
{
    const int32_t ok[4] = {0, 0, 1, 1}, bad[4] = {0, -1, 1, 1};
    CHECK_EQ_INT(ss_expert_placement("0", ok, 4), SS_OK);
    CHECK_EQ_INT(ss_expert_placement("0", ok, 4), SS_OK); /* replaces it */
    CHECK_EQ_INT(ss_expert_placement("0", bad, 4), SS_EINVAL);
    CHECK_EQ_INT(ss_expert_placement("0", NULL, 4), SS_EINVAL);
    CHECK_EQ_INT(ss_expert_placement("0", ok, 0), SS_EINVAL);
    CHECK_EQ_INT(ss_expert_placement("", ok, 4), SS_EINVAL);
    /* a load sends (here: drops, disabled) the pending placement */
    const double tokens[4] = {5, 6, 7, 8};
    ss_expert_load(ss_expert_layer("0"), tokens, 4);
    ss_shard_load(ss_embedding_table("items"), tokens, 4);
}

TEST_LIST(TEST(names_are_prefixed), TEST(bad_placements_are_refused))
