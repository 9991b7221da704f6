/*
 * rank_env_test.c - the PYTHONPATH a rank gets, from a package laid out
 * beside a fake executable: after the user's entries without --auto (and
 * none without the package), first with --auto (an error without it).
 */
#include "rank_env.h"

#include <stdlib.h>
#include <string.h>

#include "testing.h"
#include "testing_tmp.h"

static const uint8_t token[WIRE_TOKEN_SIZE];

/* The entry of E's environment that starts with NAME=, or NULL. */
static const char *env_entry(const ss_rank_env *e, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; e->env[i]; i++)
        if (!strncmp(e->env[i], name, n) && e->env[i][n] == '=')
            return e->env[i] + n + 1;
    return NULL;
}

/* A tree ROOT/bin/stepscope with the package in ROOT/python; EXE gets the
 * executable's path, PY the package's folder as realpath gives it. */
static void lay_out(const char *root, int with_package, char *exe,
                    size_t exelen, char *py, size_t pylen)
{
    testing_write_file(root, "bin/stepscope", "");
    if (with_package) {
        testing_write_file(root, "python/stepscope/__init__.py", "");
        testing_write_file(root, "python/stepscope/_autoload/"
                           "sitecustomize.py", "");
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/python", root);
        REQUIRE(realpath(dir, py) != NULL);
    }
    (void)pylen;
    snprintf(exe, exelen, "%s/bin/stepscope", root);
}

static void the_package_follows_the_users_path(void)
{
    char root[1024], exe[1100], py[4096], want[8192], err[512];
    snprintf(root, sizeof root, "%s/tree", testing_tmp_dir());
    lay_out(root, 1, exe, sizeof exe, py, sizeof py);
    ss_rank_env e;

    unsetenv("PYTHONPATH");
    REQUIRE(ss_rank_env_build(&e, exe, "/s", "/d", token, "u", 0, err,
                              sizeof err) == 0);
    CHECK_STR(env_entry(&e, "PYTHONPATH"), py);
    CHECK(env_entry(&e, "STEPSCOPE_AUTO") == NULL);

    /* The user's own entries come first: their stepscope wins. */
    setenv("PYTHONPATH", "/mine:/theirs", 1);
    REQUIRE(ss_rank_env_build(&e, exe, "/s", "/d", token, "u", 0, err,
                              sizeof err) == 0);
    snprintf(want, sizeof want, "/mine:/theirs:%s", py);
    CHECK_STR(env_entry(&e, "PYTHONPATH"), want);

    /* --auto: its sitecustomize and the package first. */
    REQUIRE(ss_rank_env_build(&e, exe, "/s", "/d", token, "u", 1, err,
                              sizeof err) == 0);
    snprintf(want, sizeof want, "%s/stepscope/_autoload:%s:/mine:/theirs",
             py, py);
    CHECK_STR(env_entry(&e, "PYTHONPATH"), want);
    CHECK_STR(env_entry(&e, "STEPSCOPE_AUTO"), "1");
    unsetenv("PYTHONPATH");
}

static void without_the_package(void)
{
    char root[1024], exe[1100], py[4096] = "", err[512] = "";
    snprintf(root, sizeof root, "%s/bare", testing_tmp_dir());
    lay_out(root, 0, exe, sizeof exe, py, sizeof py);
    ss_rank_env e;
    setenv("PYTHONPATH", "/mine", 1);
    /* No entry: the rank inherits the user's PYTHONPATH untouched. */
    REQUIRE(ss_rank_env_build(&e, exe, "/s", "/d", token, "u", 0, err,
                              sizeof err) == 0);
    CHECK(env_entry(&e, "PYTHONPATH") == NULL);
    CHECK(env_entry(&e, "STEPSCOPE_ADDR") != NULL);
    /* --auto cannot do without it, and says where it looked. */
    CHECK_EQ_INT(ss_rank_env_build(&e, exe, "/s", "/d", token, "u", 1, err,
                                   sizeof err), -1);
    CHECK(strstr(err, "--auto needs the stepscope Python package") != NULL);
    CHECK(strstr(err, "bare/bin/python") != NULL);
    unsetenv("PYTHONPATH");
}

TEST_LIST(TEST(the_package_follows_the_users_path), TEST(without_the_package))
