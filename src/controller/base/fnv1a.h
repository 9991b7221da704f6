/*
 * fnv1a.h - FNV-1a, 64 bits: a fast hash of bytes for hash tables,
 * equality digests compared within one process, and names of cache files.
 * Not a defence against anyone choosing the bytes: never for security.
 */
#ifndef STEPSCOPE_FNV1A_H
#define STEPSCOPE_FNV1A_H

#include <stddef.h>
#include <stdint.h>

#define SS_FNV1A_BASIS 0xcbf29ce484222325ULL /* the hash of no bytes */

/* H (SS_FNV1A_BASIS to begin, or what an earlier call returned) moved
 * over the N bytes at P: hashing A then B equals hashing A followed by B. */
static inline uint64_t ss_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

#endif
