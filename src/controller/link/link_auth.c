/*
 * link_auth.c - the agent link's shared secret, proofs, session key and
 * token sealing (link_auth.h), on libsodium's HMAC-SHA256.
 *
 * Every proof and the session key are HMAC-SHA256 under the secret over
 * one message: a role label, both nonces and the agent's identity, each
 * field fixed-size or length-prefixed so no two different inputs encode
 * the same (docs/protocol.md, "Agent link").  The labels differ per role
 * and for the key, so neither proof can stand in for the other or reveal
 * the key.
 */
#include "link_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LABEL_CONTROLLER "stepscope agent link v1 controller"
#define LABEL_AGENT "stepscope agent link v1 agent"
#define LABEL_SESSION "stepscope agent link v1 session key"
#define LABEL_TOKEN "token"

#define HOW_TO_MAKE                                                           \
    "make one with: head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE"

/* The largest token file read: the secret plus generous trailing space. */
#define FILE_READ_MAX (LINK_SECRET_MAX + 256)

int link_auth_init(void)
{
    return sodium_init() < 0 ? -1 : 0;
}

void link_random(uint8_t *buf, size_t len)
{
    randombytes_buf(buf, len);
}

static int is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
           c == '\f';
}

/* Trims trailing white space from BYTES[0..LEN) into OUT; checks the
 * length.  WHERE names the source for the error. */
static int take_secret(const uint8_t *bytes, size_t len, const char *where,
                       link_secret *out, char *err, size_t errlen)
{
    while (len > 0 && is_space(bytes[len - 1]))
        len--;
    if (len < LINK_SECRET_MIN) {
        snprintf(err, errlen,
                 "the shared secret in %s is %s (%zu bytes, at least %d "
                 "needed): %s",
                 where, len == 0 ? "empty" : "too short", len,
                 LINK_SECRET_MIN, HOW_TO_MAKE);
        return -1;
    }
    if (len > LINK_SECRET_MAX) {
        snprintf(err, errlen,
                 "the shared secret in %s is too long (at most %d bytes): %s",
                 where, LINK_SECRET_MAX, HOW_TO_MAKE);
        return -1;
    }
    memcpy(out->bytes, bytes, len);
    out->len = len;
    return 0;
}

static int load_file(const char *path, link_secret *out, char *err,
                     size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open token file %s: %s (%s)", path,
                 strerror(errno), HOW_TO_MAKE);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "token file %s is not a regular file (%s)",
                 path, HOW_TO_MAKE);
        close(fd);
        return -1;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errlen,
                 "token file %s is accessible by group or others (mode %03o):"
                 " run chmod 600 %s",
                 path, (unsigned)(st.st_mode & 0777), path);
        close(fd);
        return -1;
    }
    if (st.st_size > FILE_READ_MAX) {
        snprintf(err, errlen,
                 "token file %s is too large (%lld bytes; a secret has at "
                 "most %d): %s",
                 path, (long long)st.st_size, LINK_SECRET_MAX, HOW_TO_MAKE);
        close(fd);
        return -1;
    }
    uint8_t buf[FILE_READ_MAX + 1];
    size_t len = 0;
    while (len < sizeof buf) {
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "cannot read token file %s: %s", path,
                     strerror(errno));
            close(fd);
            sodium_memzero(buf, sizeof buf);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    char where[512];
    snprintf(where, sizeof where, "token file %s", path);
    int rc = len > FILE_READ_MAX
                 ? (snprintf(err, errlen, "token file %s grew too large "
                             "while being read", path), -1)
                 : take_secret(buf, len, where, out, err, errlen);
    sodium_memzero(buf, sizeof buf);
    return rc;
}

int link_secret_load(const char *token_file, const char *env_value,
                     link_secret *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (token_file)
        return load_file(token_file, out, err, errlen);
    if (env_value && env_value[0] != '\0')
        return take_secret((const uint8_t *)env_value, strlen(env_value),
                           "STEPSCOPE_TOKEN", out, err, errlen);
    snprintf(err, errlen,
             "no shared secret for the agent link: pass --token-file FILE "
             "or set STEPSCOPE_TOKEN (%s)", HOW_TO_MAKE);
    return -1;
}

void link_secret_env_scrub(void)
{
    char *value = getenv("STEPSCOPE_TOKEN");
    if (value)
        sodium_memzero(value, strlen(value));
    unsetenv("STEPSCOPE_TOKEN");
}

/* ---- proofs and keys ---- */

static void update_u32(crypto_auth_hmacsha256_state *st, uint32_t v)
{
    uint8_t t[4];
    for (int i = 0; i < 4; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    crypto_auth_hmacsha256_update(st, t, sizeof t);
}

/* A u8 length, then the bytes (at most LINK_MAX_STR). */
static void update_str(crypto_auth_hmacsha256_state *st, const char *s,
                       size_t cap)
{
    size_t n = strnlen(s, cap < LINK_MAX_STR ? cap : LINK_MAX_STR);
    uint8_t len = (uint8_t)n;
    crypto_auth_hmacsha256_update(st, &len, 1);
    crypto_auth_hmacsha256_update(st, (const uint8_t *)s, n);
}

/* HMAC-SHA256 under the secret of: LABEL, the agent's nonce, the
 * controller's nonce, the version, node rank, nnodes, nproc_per_node, job
 * id and host. */
static void keyed_digest(const link_secret *s, const char *label,
                         const link_agent_hello *hello,
                         const uint8_t controller_nonce[LINK_NONCE_SIZE],
                         uint8_t out[crypto_auth_hmacsha256_BYTES])
{
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, s->bytes, s->len);
    update_str(&st, label, strlen(label) + 1);
    crypto_auth_hmacsha256_update(&st, hello->nonce, LINK_NONCE_SIZE);
    crypto_auth_hmacsha256_update(&st, controller_nonce, LINK_NONCE_SIZE);
    update_u32(&st, hello->version);
    update_u32(&st, hello->node_rank);
    update_u32(&st, hello->nnodes);
    update_u32(&st, hello->nproc_per_node);
    update_str(&st, hello->job_id, sizeof hello->job_id);
    update_str(&st, hello->host, sizeof hello->host);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof st);
}

_Static_assert(LINK_PROOF_SIZE == crypto_auth_hmacsha256_BYTES &&
                   LINK_KEY_SIZE == crypto_auth_hmacsha256_BYTES &&
                   LINK_KEY_SIZE == crypto_auth_hmacsha256_KEYBYTES,
               "proofs and keys are whole HMAC-SHA256 outputs");

void link_auth_controller_proof(const link_secret *s,
                                const link_agent_hello *hello,
                                const uint8_t controller_nonce[LINK_NONCE_SIZE],
                                uint8_t out[LINK_PROOF_SIZE])
{
    keyed_digest(s, LABEL_CONTROLLER, hello, controller_nonce, out);
}

void link_auth_agent_proof(const link_secret *s, const link_agent_hello *hello,
                           const uint8_t controller_nonce[LINK_NONCE_SIZE],
                           uint8_t out[LINK_PROOF_SIZE])
{
    keyed_digest(s, LABEL_AGENT, hello, controller_nonce, out);
}

int link_auth_proof_equal(const uint8_t a[LINK_PROOF_SIZE],
                          const uint8_t b[LINK_PROOF_SIZE])
{
    return crypto_verify_32(a, b) == 0;
}

void link_auth_session_key(const link_secret *s, const link_agent_hello *hello,
                           const uint8_t controller_nonce[LINK_NONCE_SIZE],
                           uint8_t out[LINK_KEY_SIZE])
{
    keyed_digest(s, LABEL_SESSION, hello, controller_nonce, out);
}

void link_auth_seal_token(const uint8_t key[LINK_KEY_SIZE],
                          const uint8_t in[LINK_TOKEN_SIZE],
                          uint8_t out[LINK_TOKEN_SIZE])
{
    uint8_t pad[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256(pad, (const uint8_t *)LABEL_TOKEN,
                           strlen(LABEL_TOKEN), key);
    for (int i = 0; i < LINK_TOKEN_SIZE; i++)
        out[i] = in[i] ^ pad[i];
    sodium_memzero(pad, sizeof pad);
}
