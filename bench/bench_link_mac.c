/*
 * bench_link_mac.c - what the agent link's per-frame MAC costs.
 *
 * Every frame of a joined link carries a MAC (docs/protocol.md, "Agent
 * link"), computed by the sender and checked by the receiver: on the
 * controller of a many-node run that is two to three frames per rank per
 * step (the record's DATA, its HOST evidence, a share of NODE_STATUS).
 * This times the link's own encoder (link_encode with a keyed encoder:
 * the header, the payload and the MAC, keyed BLAKE2b since link version
 * 3) on DATA frames of several sizes, and next to it the MAC of link
 * version 2, HMAC-SHA256 over the same bytes, computed here with
 * libsodium, so both are measured in the same run on the same machine.
 *
 *   bench_link_mac [--frames N] [--reps R]
 *
 * Prints, per payload size, the median over R repetitions of the time per
 * frame of each, and their ratio.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "link_wire.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint8_t g_frame[LINK_FRAME_MAX];
static uint8_t g_payload[LINK_MAX_DATA];

/* ns per frame of N keyed DATA frames of LEN payload bytes through the
 * link's encoder. */
static double time_encoder(size_t len, long n)
{
    static const uint8_t key[LINK_KEY_SIZE] = {7};
    link_encoder e;
    link_encoder_init(&e, LINK_FROM_AGENT);
    link_encoder_keyed(&e, key);
    link_frame f = {.type = LINK_DATA};
    f.u.data = (link_data){3, (uint32_t)len, g_payload};
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        if (link_encode(&e, g_frame, sizeof g_frame, &f) == 0) {
            fprintf(stderr, "bench_link_mac: the encoder refused a frame\n");
            exit(1);
        }
        g_payload[0] ^= g_frame[LINK_HEADER_SIZE + 4 + len]; /* keep it */
    }
    return (now_s() - t0) / (double)n * 1e9;
}

/* ns per frame of link version 2's MAC over the same frame bytes (the
 * direction byte, the sequence number, the header and the payload), the
 * frame's bytes copied as the encoder copies them. */
static double time_hmac(size_t len, long n)
{
    static const uint8_t key[LINK_KEY_SIZE] = {7};
    size_t body = LINK_HEADER_SIZE + 4 + len;
    uint8_t prefix[9] = {0};
    uint8_t full[crypto_auth_hmacsha256_BYTES];
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        memcpy(g_frame + LINK_HEADER_SIZE + 4, g_payload, len);
        prefix[1] = (uint8_t)i;
        crypto_auth_hmacsha256_state st;
        crypto_auth_hmacsha256_init(&st, key, sizeof key);
        crypto_auth_hmacsha256_update(&st, prefix, sizeof prefix);
        crypto_auth_hmacsha256_update(&st, g_frame, body);
        crypto_auth_hmacsha256_final(&st, full);
        memcpy(g_frame + body, full, LINK_MAC_SIZE);
        g_payload[0] ^= full[0];
    }
    return (now_s() - t0) / (double)n * 1e9;
}

int main(int argc, char **argv)
{
    long frames = 200000;
    int reps = 7;
    static const struct option opts[] = {
        {"frames", required_argument, NULL, 'f'},
        {"reps", required_argument, NULL, 'r'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'f')
            frames = atol(optarg);
        else if (c == 'r')
            reps = atoi(optarg);
        else {
            fprintf(stderr, "usage: bench_link_mac [--frames N] [--reps R]\n");
            return 2;
        }
    }
    if (frames < 1 || reps < 1 || reps > 99) {
        fprintf(stderr, "bench_link_mac: --frames wants >= 1, --reps 1..99\n");
        return 2;
    }
    if (sodium_init() < 0) {
        fprintf(stderr, "bench_link_mac: libsodium did not start\n");
        return 1;
    }
    for (size_t i = 0; i < sizeof g_payload; i++)
        g_payload[i] = (uint8_t)(i * 31 + 7);
    static const size_t sizes[] = {64, 220, 512, 1024, 4096, 16384};
    printf("DATA frame, keyed; median of %d repetitions of %ld frames\n",
           reps, frames);
    printf("%8s  %22s  %26s  %6s\n", "payload", "link v3 encode (ns)",
           "v2 MAC, HMAC-SHA256 (ns)", "ratio");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        double enc[99], hm[99];
        long n = sizes[s] > 1024 ? frames / 8 : frames;
        for (int r = 0; r < reps; r++) { /* interleaved */
            enc[r] = time_encoder(sizes[s], n);
            hm[r] = time_hmac(sizes[s], n);
        }
        qsort(enc, (size_t)reps, sizeof enc[0], cmp_double);
        qsort(hm, (size_t)reps, sizeof hm[0], cmp_double);
        double e = enc[reps / 2], h = hm[reps / 2];
        printf("%8zu  %22.0f  %26.0f  %6.2f\n", sizes[s], e, h, h / e);
    }
    return 0;
}
