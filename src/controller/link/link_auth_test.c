/*
 * link_auth_test.c - unit tests for link_auth.c: proofs are deterministic,
 * differ per role (no reflection) and change with every nonce, identity
 * field and secret; the session key is neither proof; sealing twice is
 * the identity and depends on the key; the secret loads from a private
 * file (trimmed) or the environment, and every refusal says what to do.
 */
#include "link_auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testing.h"
#include "testing_tmp.h"

static link_secret secret_of(const char *text)
{
    link_secret s;
    memset(&s, 0, sizeof s);
    s.len = strlen(text);
    memcpy(s.bytes, text, s.len);
    return s;
}

static link_agent_hello sample_hello(void)
{
    link_agent_hello h;
    memset(&h, 0, sizeof h);
    h.version = LINK_VERSION;
    h.node_rank = 1;
    h.nnodes = 4;
    h.nproc_per_node = 8;
    for (int i = 0; i < LINK_NONCE_SIZE; i++)
        h.nonce[i] = (uint8_t)i;
    strcpy(h.job_id, "job-7");
    strcpy(h.host, "node-b");
    return h;
}

static uint8_t k_cnonce[LINK_NONCE_SIZE] = {9, 9, 9};

static void proofs_are_deterministic_and_role_bound(void)
{
    REQUIRE(link_auth_init() == 0);
    REQUIRE(link_auth_init() == 0);
    link_secret s = secret_of("correct horse battery staple");
    link_agent_hello h = sample_hello();
    uint8_t c1[32], c2[32], a1[32], key[32];
    link_auth_controller_proof(&s, &h, k_cnonce, c1);
    link_auth_controller_proof(&s, &h, k_cnonce, c2);
    link_auth_agent_proof(&s, &h, k_cnonce, a1);
    link_auth_session_key(&s, &h, k_cnonce, key);
    CHECK(link_auth_proof_equal(c1, c2));
    CHECK(!link_auth_proof_equal(c1, a1));
    CHECK(memcmp(key, c1, 32) != 0 && memcmp(key, a1, 32) != 0);
}

/* Each field of the identity, each nonce and the secret change the
 * controller proof, the agent proof and the session key. */
static void every_input_changes_the_proof(void)
{
    REQUIRE(link_auth_init() == 0);
    link_secret s = secret_of("correct horse battery staple");
    link_agent_hello h0 = sample_hello();
    uint8_t base_c[32], base_a[32], base_k[32];
    link_auth_controller_proof(&s, &h0, k_cnonce, base_c);
    link_auth_agent_proof(&s, &h0, k_cnonce, base_a);
    link_auth_session_key(&s, &h0, k_cnonce, base_k);
    for (int variant = 0; variant < 10; variant++) {
        link_agent_hello h = sample_hello();
        link_secret sv = s;
        uint8_t cn[LINK_NONCE_SIZE];
        memcpy(cn, k_cnonce, sizeof cn);
        switch (variant) {
        case 0: h.node_rank = 2; break;
        case 1: h.nnodes = 5; break;
        case 2: h.nproc_per_node = 7; break;
        case 3: strcpy(h.job_id, "job-8"); break;
        case 4: strcpy(h.host, "node-c"); break;
        case 5: h.nonce[31] ^= 1; break;
        case 6: cn[0] ^= 0x80; break;
        case 7: sv.bytes[0] ^= 1; break;
        /* Moving a byte between the strings changes the proof: the
         * lengths are part of the message. */
        case 8: strcpy(h.job_id, "job-7n"); strcpy(h.host, "ode-b"); break;
        case 9: h.version = LINK_VERSION + 1; break;
        }
        uint8_t c[32], a[32], k[32];
        link_auth_controller_proof(&sv, &h, cn, c);
        link_auth_agent_proof(&sv, &h, cn, a);
        link_auth_session_key(&sv, &h, cn, k);
        if (link_auth_proof_equal(c, base_c) ||
            link_auth_proof_equal(a, base_a) || memcmp(k, base_k, 32) == 0)
            fprintf(stderr, "  variant %d did not change the proofs\n",
                    variant);
        CHECK(!link_auth_proof_equal(c, base_c));
        CHECK(!link_auth_proof_equal(a, base_a));
        CHECK(memcmp(k, base_k, 32) != 0);
    }
}

static void wrong_secret_fails(void)
{
    REQUIRE(link_auth_init() == 0);
    link_secret right = secret_of("the secret of this run, 32 bytes");
    link_secret wrong = secret_of("the secret of that run, 32 bytes");
    link_agent_hello h = sample_hello();
    uint8_t want[32], got[32];
    link_auth_agent_proof(&right, &h, k_cnonce, want);
    link_auth_agent_proof(&wrong, &h, k_cnonce, got);
    CHECK(!link_auth_proof_equal(want, got));
    /* A different length of the same prefix too. */
    link_secret longer = secret_of("the secret of this run, 32 bytes!");
    link_auth_agent_proof(&longer, &h, k_cnonce, got);
    CHECK(!link_auth_proof_equal(want, got));
}

static void sealing(void)
{
    REQUIRE(link_auth_init() == 0);
    uint8_t key[32], other[32], token[16], sealed[16], back[16], wrong[16];
    for (int i = 0; i < 32; i++)
        key[i] = other[i] = (uint8_t)(i * 3);
    other[5] ^= 1;
    for (int i = 0; i < 16; i++)
        token[i] = (uint8_t)(0xc0 + i);
    link_auth_seal_token(key, token, sealed);
    CHECK(memcmp(sealed, token, 16) != 0);
    link_auth_seal_token(key, sealed, back);
    CHECK(memcmp(back, token, 16) == 0);
    link_auth_seal_token(other, sealed, wrong);
    CHECK(memcmp(wrong, token, 16) != 0);
}

static void random_bytes_differ(void)
{
    REQUIRE(link_auth_init() == 0);
    uint8_t a[32], b[32];
    link_random(a, sizeof a);
    link_random(b, sizeof b);
    CHECK(memcmp(a, b, sizeof a) != 0);
}

static const char *write_file(const char *name, const char *text, int mode)
{
    static char path[600];
    testing_tmp_path(name, path, sizeof path);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        if (write(fd, text, strlen(text)) < 0)
            perror("write");
        close(fd);
    }
    chmod(path, (mode_t)mode);
    return path;
}

static void secret_from_file(void)
{
    link_secret s;
    char err[512];
    const char *p = write_file("ok", "c2VjcmV0LXNlY3JldC1zZWNyZXQ=\n\n \t", 0600);
    REQUIRE(link_secret_load(p, "ignored-when-a-file-is-given", &s, err,
                             sizeof err) == 0);
    CHECK_EQ_INT(s.len, strlen("c2VjcmV0LXNlY3JldC1zZWNyZXQ="));
    CHECK(memcmp(s.bytes, "c2VjcmV0LXNlY3JldC1zZWNyZXQ=", s.len) == 0);
    /* Read-only for the owner is fine too. */
    p = write_file("ro", "0123456789abcdef", 0400);
    CHECK(link_secret_load(p, NULL, &s, err, sizeof err) == 0);
    CHECK_EQ_INT(s.len, 16);
}

static void secret_file_refusals(void)
{
    link_secret s;
    char err[512];
    const char *p = write_file("open", "0123456789abcdef0123", 0644);
    CHECK(link_secret_load(p, NULL, &s, err, sizeof err) == -1);
    CHECK(strstr(err, "chmod 600") != NULL);
    CHECK(strstr(err, "mode 644") != NULL);
    p = write_file("group", "0123456789abcdef0123", 0640);
    CHECK(link_secret_load(p, NULL, &s, err, sizeof err) == -1);
    CHECK(strstr(err, "chmod 600") != NULL);

    p = write_file("short", "too short\n", 0600);
    CHECK(link_secret_load(p, NULL, &s, err, sizeof err) == -1);
    CHECK(strstr(err, "too short") != NULL);
    CHECK(strstr(err, "head -c 32 /dev/urandom") != NULL);
    p = write_file("blank", " \n\n", 0600);
    CHECK(link_secret_load(p, NULL, &s, err, sizeof err) == -1);
    CHECK(strstr(err, "empty") != NULL);

    static char big[LINK_SECRET_MAX + 2];
    memset(big, 'k', LINK_SECRET_MAX + 1);
    p = write_file("long", big, 0600);
    CHECK(link_secret_load(p, NULL, &s, err, sizeof err) == -1);
    CHECK(strstr(err, "too long") != NULL);
    big[LINK_SECRET_MAX] = '\0';
    p = write_file("max", big, 0600);
    CHECK(link_secret_load(p, NULL, &s, err, sizeof err) == 0);
    CHECK_EQ_INT(s.len, LINK_SECRET_MAX);

    char path[600];
    testing_tmp_path("missing", path, sizeof path);
    CHECK(link_secret_load(path, "fallback-is-not-used-here", &s, err,
                           sizeof err) == -1);
    CHECK(strstr(err, "cannot open token file") != NULL);
    CHECK(strstr(err, "No such file") != NULL);

    CHECK(link_secret_load(testing_tmp_dir(), NULL, &s, err, sizeof err) ==
          -1);
    CHECK(strstr(err, "not a regular file") != NULL);
}

static void secret_from_environment(void)
{
    link_secret s;
    char err[512];
    CHECK(link_secret_load(NULL, "an environment secret\n", &s, err,
                           sizeof err) == 0);
    CHECK_EQ_INT(s.len, strlen("an environment secret"));
    CHECK(link_secret_load(NULL, "short", &s, err, sizeof err) == -1);
    CHECK(strstr(err, "STEPSCOPE_TOKEN") != NULL);
    CHECK(strstr(err, "too short") != NULL);
    CHECK(link_secret_load(NULL, "", &s, err, sizeof err) == -1);
    CHECK(strstr(err, "no shared secret") != NULL);
    CHECK(link_secret_load(NULL, NULL, &s, err, sizeof err) == -1);
    CHECK_STR(err, "no shared secret for the agent link: pass --token-file "
                   "FILE or set STEPSCOPE_TOKEN (make one with: head -c 32 "
                   "/dev/urandom | base64 > FILE; chmod 600 FILE)");
}

TEST_LIST({"proofs_are_deterministic_and_role_bound",
           proofs_are_deterministic_and_role_bound},
          {"every_input_changes_the_proof", every_input_changes_the_proof},
          {"wrong_secret_fails", wrong_secret_fails},
          {"sealing", sealing},
          {"random_bytes_differ", random_bytes_differ},
          {"secret_from_file", secret_from_file},
          {"secret_file_refusals", secret_file_refusals},
          {"secret_from_environment", secret_from_environment})
