/*
 * fuzz_link.c - libFuzzer target for the agent link's decoder.
 *
 * The first input byte picks the decoder: bit 0 the direction it reads
 * (0: the controller's, from an agent; 1: the agent's, from the
 * controller); bit 1 a decoder that has already been through the
 * handshake and is keyed with a fixed key, so the MACed frames are
 * reachable; bit 3 (without bit 1) a decoder in the middle of the
 * handshake, before authentication: the controller's after AGENT_HELLO
 * (PROOF expected, unkeyed), the agent's after CHALLENGE (keyed; JOIN_OK
 * or a MACed JOIN_REJECT expected).  To let the fuzzer past the MAC, bit 2
 * re-MACs every frame of the rest of the input with that key and the
 * expected sequence number before decoding it.  The decoder must never
 * crash, read out of bounds or report a consumed size larger than what it
 * was given, and before it is keyed no frame it accepts may be larger
 * than the handshake's limit (LINK_MAX_HANDSHAKE_PAYLOAD).
 */
#include "link_wire.h"

#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t k_key[LINK_KEY_SIZE] = {
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};

static uint8_t g_frame[LINK_FRAME_MAX];

/* Brings D past the handshake with well-formed frames, then keys it; or
 * with HALF, only as far as the frame that authenticates the peer (the
 * agent's decoder is keyed then, the controller's not yet). */
static void join(link_decoder *d, int half)
{
    link_encoder e;
    link_frame f, out;
    uint8_t buf[1024];
    size_t used;
    char err[256];
    memset(&f, 0, sizeof f);
    if (d->direction == LINK_FROM_AGENT) {
        link_encoder_init(&e, LINK_FROM_AGENT);
        f.type = LINK_AGENT_HELLO;
        f.u.hello.version = LINK_VERSION;
        f.u.hello.nnodes = 2;
        f.u.hello.nproc_per_node = 1;
        strcpy(f.u.hello.job_id, "fuzz");
        size_t n = link_encode(&e, buf, sizeof buf, &f);
        if (link_decoder_next(d, buf, n, &out, &used, err, sizeof err) != LINK_OK)
            abort();
        if (half)
            return;
        f.type = LINK_PROOF;
        n = link_encode(&e, buf, sizeof buf, &f);
        if (link_decoder_next(d, buf, n, &out, &used, err, sizeof err) != LINK_OK)
            abort();
        link_decoder_keyed(d, k_key);
    } else {
        link_encoder_init(&e, LINK_FROM_CONTROLLER);
        f.type = LINK_CHALLENGE;
        size_t n = link_encode(&e, buf, sizeof buf, &f);
        if (link_decoder_next(d, buf, n, &out, &used, err, sizeof err) != LINK_OK)
            abort();
        link_decoder_keyed(d, k_key);
        if (half)
            return;
        link_encoder_keyed(&e, k_key);
        f.type = LINK_JOIN_OK;
        f.u.join_ok.world_size = 2;
        n = link_encode(&e, buf, sizeof buf, &f);
        if (link_decoder_next(d, buf, n, &out, &used, err, sizeof err) != LINK_OK)
            abort();
    }
}

/* Copies the frame at P into g_frame with a valid MAC for D's next
 * sequence number; returns its size, or 0 when P holds no whole header
 * and payload. */
static size_t remac(const link_decoder *d, const uint8_t *p, size_t len)
{
    if (len < LINK_HEADER_SIZE)
        return 0;
    size_t payload = (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 |
                     (size_t)p[3] << 24;
    if (payload > LINK_MAX_PAYLOAD || len - LINK_HEADER_SIZE < payload)
        return 0;
    size_t body = LINK_HEADER_SIZE + payload;
    uint8_t prefix[9];
    prefix[0] = (uint8_t)d->direction;
    for (int i = 0; i < 8; i++)
        prefix[1 + i] = (uint8_t)(d->seq >> (8 * i));
    crypto_generichash_blake2b_state st;
    crypto_generichash_blake2b_init(&st, k_key, sizeof k_key, LINK_MAC_SIZE);
    crypto_generichash_blake2b_update(&st, prefix, sizeof prefix);
    crypto_generichash_blake2b_update(&st, p, body);
    memcpy(g_frame, p, body);
    crypto_generichash_blake2b_final(&st, g_frame + body, LINK_MAC_SIZE);
    return body + LINK_MAC_SIZE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    link_decoder d;
    link_decoder_init(&d, (data[0] & 1) ? LINK_FROM_CONTROLLER
                                        : LINK_FROM_AGENT);
    if (data[0] & 2)
        join(&d, 0);
    else if (data[0] & 8)
        join(&d, 1);
    int fix_macs = (data[0] & 4) && d.keyed;
    const uint8_t *p = data + 1;
    size_t len = size - 1;
    link_frame f;
    char err[256];
    while (len > 0) {
        size_t used = 0;
        link_result rc;
        int keyed_before = d.keyed;
        if (fix_macs) {
            size_t n = remac(&d, p, len);
            if (n == 0)
                return 0;
            rc = link_decoder_next(&d, g_frame, n, &f, &used, err, sizeof err);
            if (rc == LINK_OK && used != n)
                abort();
            used = n - LINK_MAC_SIZE; /* the input's frame has no MAC */
        } else {
            rc = link_decoder_next(&d, p, len, &f, &used, err, sizeof err);
            if (rc == LINK_OK && (used == 0 || used > len))
                abort();
        }
        if (rc != LINK_OK)
            return 0;
        if (!keyed_before && used > LINK_HEADER_SIZE + LINK_MAX_HANDSHAKE_PAYLOAD)
            abort();
        p += used;
        len -= used;
    }
    return 0;
}
