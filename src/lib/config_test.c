/*
 * config_test.c - parsing of STEPSCOPE_ADDR / TOKEN / RUN_ID and the rank
 * variables from a table instead of the real environment.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include "config.h"
#include "stepscope.h"
#include "testing.h"

#define TOKEN "00112233445566778899aabbccddeeff"

static const char *const *fake_env;

static char *fake_get(const char *name)
{
    size_t n = strlen(name);
    for (const char *const *e = fake_env; *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return (char *)(*e + n + 1);
    return NULL;
}

static int parse(const char *const *env, ss__config *cfg, char *err,
                 size_t errlen)
{
    fake_env = env;
    return ss__config_parse(cfg, fake_get, err, errlen);
}

static void absent_addr_means_disabled(void)
{
    ss__config cfg;
    char err[128];
    const char *none[] = {"RANK=1", NULL};
    CHECK_EQ_INT(parse(none, &cfg, err, sizeof err), SS__CONFIG_ABSENT);
    const char *empty[] = {"STEPSCOPE_ADDR=", NULL};
    CHECK_EQ_INT(parse(empty, &cfg, err, sizeof err), SS__CONFIG_ABSENT);
}

static void unix_addr_and_rank_variables(void)
{
    ss__config cfg;
    char err[128];
    const char *env[] = {"STEPSCOPE_ADDR=unix:/tmp/x.sock",
                         "STEPSCOPE_TOKEN=" TOKEN, "STEPSCOPE_RUN_ID=run-7",
                         "RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1",
                         "TORCHELASTIC_RESTART_COUNT=2", NULL};
    REQUIRE(parse(env, &cfg, err, sizeof err) == SS__CONFIG_ENABLED);
    const struct sockaddr_un *sun = (const struct sockaddr_un *)&cfg.addr;
    CHECK_EQ_INT(sun->sun_family, AF_UNIX);
    CHECK_STR(sun->sun_path, "/tmp/x.sock");
    CHECK_STR(cfg.addr_text, "unix:/tmp/x.sock");
    CHECK_EQ_INT(cfg.hello.version, WIRE_VERSION);
    CHECK_EQ_INT(cfg.hello.rank, 3);
    CHECK_EQ_INT(cfg.hello.world_size, 8);
    CHECK_EQ_INT(cfg.hello.local_rank, 1);
    CHECK_EQ_INT(cfg.hello.attempt, 2);
    CHECK_EQ_INT(cfg.hello.token[0], 0x00);
    CHECK_EQ_INT(cfg.hello.token[15], 0xff);
    CHECK_STR(cfg.hello.run_id, "run-7");
    CHECK(cfg.hello.host[0] != '\0');
}

static void defaults_without_rank_variables(void)
{
    ss__config cfg;
    char err[128];
    const char *env[] = {"STEPSCOPE_ADDR=tcp:127.0.0.1:4242",
                         "STEPSCOPE_TOKEN=" TOKEN, "STEPSCOPE_RUN_ID=r",
                         NULL};
    REQUIRE(parse(env, &cfg, err, sizeof err) == SS__CONFIG_ENABLED);
    const struct sockaddr_in *in = (const struct sockaddr_in *)&cfg.addr;
    CHECK_EQ_INT(in->sin_family, AF_INET);
    CHECK_EQ_INT(ntohs(in->sin_port), 4242);
    CHECK(in->sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    CHECK_EQ_INT(cfg.hello.rank, 0);
    CHECK_EQ_INT(cfg.hello.world_size, 1);
    CHECK_EQ_INT(cfg.hello.local_rank, 0);
    CHECK_EQ_INT(cfg.hello.attempt, 0);
}

static void tcp_ipv6(void)
{
    ss__config cfg;
    char err[128];
    const char *env[] = {"STEPSCOPE_ADDR=tcp:[::1]:9", "STEPSCOPE_TOKEN=" TOKEN,
                         "STEPSCOPE_RUN_ID=r", NULL};
    REQUIRE(parse(env, &cfg, err, sizeof err) == SS__CONFIG_ENABLED);
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&cfg.addr;
    CHECK_EQ_INT(in6->sin6_family, AF_INET6);
    CHECK_EQ_INT(ntohs(in6->sin6_port), 9);
}

/* Each malformed variable gives SS_EENV and names itself in ERR. */
static void malformed_values_are_named(void)
{
    static const struct {
        const char *var, *value, *expect_in_err;
    } cases[] = {
        {"STEPSCOPE_ADDR", "bogus", "STEPSCOPE_ADDR"},
        {"STEPSCOPE_ADDR", "unix:", "STEPSCOPE_ADDR"},
        {"STEPSCOPE_ADDR", "tcp:localhost:80", "STEPSCOPE_ADDR"},
        {"STEPSCOPE_ADDR", "tcp:127.0.0.1", "STEPSCOPE_ADDR"},
        {"STEPSCOPE_ADDR", "tcp:127.0.0.1:70000", "STEPSCOPE_ADDR"},
        {"STEPSCOPE_TOKEN", "abc", "STEPSCOPE_TOKEN"},
        {"STEPSCOPE_TOKEN", "zz112233445566778899aabbccddeeff",
         "STEPSCOPE_TOKEN"},
        {"STEPSCOPE_RUN_ID", "", "STEPSCOPE_RUN_ID"},
        {"STEPSCOPE_RUN_ID", "a\nb", "STEPSCOPE_RUN_ID"},
        {"RANK", "-1", "RANK"},
        {"RANK", "8", "RANK=8 is outside WORLD_SIZE=8"},
        {"WORLD_SIZE", "0", "outside WORLD_SIZE=0"},
        {"LOCAL_RANK", "x", "LOCAL_RANK"},
        {"TORCHELASTIC_RESTART_COUNT", "99999999999", "TORCHELASTIC"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *env[8] = {0};
        char slots[6][128];
        const char *vars[] = {"STEPSCOPE_ADDR", "STEPSCOPE_TOKEN",
                              "STEPSCOPE_RUN_ID", "RANK", "WORLD_SIZE",
                              "LOCAL_RANK"};
        const char *good[] = {"unix:/tmp/s", TOKEN, "r", "1", "8", "0"};
        int k = 0;
        for (int v = 0; v < 6; v++) {
            const char *val = strcmp(vars[v], cases[i].var) == 0
                                  ? cases[i].value : good[v];
            snprintf(slots[v], sizeof slots[v], "%s=%s", vars[v], val);
            env[k++] = slots[v];
        }
        char extra[128];
        if (strcmp(cases[i].var, "TORCHELASTIC_RESTART_COUNT") == 0) {
            snprintf(extra, sizeof extra, "%s=%s", cases[i].var,
                     cases[i].value);
            env[k++] = extra;
        }
        ss__config cfg;
        char err[256];
        int rc = parse(env, &cfg, err, sizeof err);
        if (rc != SS_EENV || !strstr(err, cases[i].expect_in_err)) {
            fprintf(stderr, "  case %s=%s: rc %d, err '%s'\n", cases[i].var,
                    cases[i].value, rc, err);
            CHECK(0);
        }
    }
}

static void missing_token_or_run_id_is_malformed(void)
{
    ss__config cfg;
    char err[128];
    const char *no_token[] = {"STEPSCOPE_ADDR=unix:/s", "STEPSCOPE_RUN_ID=r",
                              NULL};
    CHECK_EQ_INT(parse(no_token, &cfg, err, sizeof err), SS_EENV);
    CHECK(strstr(err, "STEPSCOPE_TOKEN") != NULL);
    const char *no_run[] = {"STEPSCOPE_ADDR=unix:/s",
                            "STEPSCOPE_TOKEN=" TOKEN, NULL};
    CHECK_EQ_INT(parse(no_run, &cfg, err, sizeof err), SS_EENV);
    CHECK(strstr(err, "STEPSCOPE_RUN_ID") != NULL);
}

TEST_LIST(TEST(absent_addr_means_disabled),
          TEST(unix_addr_and_rank_variables),
          TEST(defaults_without_rank_variables),
          TEST(tcp_ipv6),
          TEST(malformed_values_are_named),
          TEST(missing_token_or_run_id_is_malformed))
