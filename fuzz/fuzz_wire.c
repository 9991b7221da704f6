/*
 * fuzz_wire.c - libFuzzer target for the wire decoder.
 *
 * The input is a byte stream as a rank could send it.  When the first byte
 * is odd, a valid HELLO is fed first so the fuzzer also reaches the frames
 * after the handshake.  The decoder must never crash, read out of bounds or
 * report a consumed size larger than what it was given.
 */
#include "wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t k_token[WIRE_TOKEN_SIZE] = {7, 7, 7, 7, 7, 7, 7, 7,
                                                 7, 7, 7, 7, 7, 7, 7, 7};

static void drain(wire_decoder *d, const uint8_t *p, size_t len)
{
    wire_frame f;
    char err[256];
    while (len > 0) {
        size_t used = 0;
        wire_result rc = wire_decoder_next(d, p, len, &f, &used, err, sizeof err);
        if (rc != WIRE_OK)
            return;
        if (used == 0 || used > len)
            abort();
        p += used;
        len -= used;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    wire_decoder d;
    wire_decoder_init(&d, (data[0] & 2) ? WIRE_FROM_CONTROLLER : WIRE_FROM_RANK,
                      k_token, "fuzz");
    if (data[0] & 1) {
        wire_hello h;
        memset(&h, 0, sizeof h);
        h.version = WIRE_VERSION;
        h.world_size = 8;
        memcpy(h.token, k_token, sizeof k_token);
        strcpy(h.run_id, "fuzz");
        strcpy(h.host, "h");
        uint8_t buf[512];
        size_t n = wire_encode_hello(buf, sizeof buf, &h);
        drain(&d, buf, n);
    }
    drain(&d, data + 1, size - 1);
    return 0;
}
