/*
 * link_auth.h - the shared secret of a multi-node run and the
 * challenge-response that proves both ends of an agent link know it.
 *
 * The secret comes from `--token-file FILE` or the STEPSCOPE_TOKEN
 * environment variable; it never crosses the network.  Each side sends a
 * fresh random nonce; each proves itself with HMAC-SHA256 (libsodium) over
 * a role label, both nonces and the agent's identity (node rank, job id),
 * so a proof cannot be replayed on another link, reflected to the other
 * role, or moved to another node.  The session key that MACs every later
 * frame is derived from the secret and both nonces.  Comparisons are
 * constant-time.
 */
#ifndef STEPSCOPE_LINK_AUTH_H
#define STEPSCOPE_LINK_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "link_wire.h"

#define LINK_SECRET_MIN 16   /* bytes, after trimming trailing white space */
#define LINK_SECRET_MAX 1024

typedef struct {
    size_t len;
    uint8_t bytes[LINK_SECRET_MAX];
} link_secret;

/* Initialises the crypto library; returns 0, or -1 (then nothing here may
 * be used).  Safe to call more than once. */
int link_auth_init(void);

/*
 * Loads the secret: from TOKEN_FILE when not NULL (a regular file, not
 * readable by group or others, LINK_SECRET_MIN..LINK_SECRET_MAX bytes after
 * trailing white space is trimmed), else from ENV_VALUE (the value of
 * STEPSCOPE_TOKEN) when not NULL and not empty.  Returns 0, or -1 with a
 * one-line reason in ERR that says how to make one (for example
 * "no shared secret for the agent link: pass --token-file FILE or set
 * STEPSCOPE_TOKEN (make one with: head -c 32 /dev/urandom | base64 > FILE;
 * chmod 600 FILE)").
 */
int link_secret_load(const char *token_file, const char *env_value,
                     link_secret *out, char *err, size_t errlen);

/*
 * Removes STEPSCOPE_TOKEN from the environment, its value overwritten with
 * zeros where it lay (so /proc/PID/environ and the process's memory no
 * longer hold it either): called once the secret is loaded (or when it is
 * not used), before anything is started, so health checks and whatever
 * the ranks start never inherit it.  Not thread-safe (unsetenv): call it
 * before starting threads.
 */
void link_secret_env_scrub(void);

/* Fills BUF with LEN random bytes (nonces). */
void link_random(uint8_t *buf, size_t len);

/* The controller's proof, sent in CHALLENGE. */
void link_auth_controller_proof(const link_secret *s,
                                const link_agent_hello *hello,
                                const uint8_t controller_nonce[LINK_NONCE_SIZE],
                                uint8_t out[LINK_PROOF_SIZE]);

/* The agent's proof, sent in PROOF. */
void link_auth_agent_proof(const link_secret *s, const link_agent_hello *hello,
                           const uint8_t controller_nonce[LINK_NONCE_SIZE],
                           uint8_t out[LINK_PROOF_SIZE]);

/* Constant-time comparison of two proofs: 1 when equal. */
int link_auth_proof_equal(const uint8_t a[LINK_PROOF_SIZE],
                          const uint8_t b[LINK_PROOF_SIZE]);

/* The session key of one link (both sides derive the same). */
void link_auth_session_key(const link_secret *s, const link_agent_hello *hello,
                           const uint8_t controller_nonce[LINK_NONCE_SIZE],
                           uint8_t out[LINK_KEY_SIZE]);

/* Seals (or, applied again, unseals) the ranks' token for JOIN_OK under
 * the session key: a keyed stream, so only the two ends can read it. */
void link_auth_seal_token(const uint8_t key[LINK_KEY_SIZE],
                          const uint8_t in[LINK_TOKEN_SIZE],
                          uint8_t out[LINK_TOKEN_SIZE]);

#endif
