/*
 * rng.c - counter-based random numbers (rng.h): assay_mix64 (a splitmix64
 * finaliser), assay_hash_str, assay_seed_derive (a check's seed from the
 * master seed and its name) and assay_rng_u01, a uniform draw that is a pure
 * function of (seed, counter, purpose). The engine and every seeded check
 * draw through these; nothing keeps a stream.
 */
#include "rng.h"

#include <stddef.h>

uint64_t assay_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t assay_hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    if (s == NULL) {
        return h;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t assay_seed_derive(uint64_t master, const char *name)
{
    uint64_t s = assay_mix64(assay_mix64(master) ^ assay_hash_str(name));
    return s == 0 ? 1 : s;
}

double assay_rng_u01(uint64_t seed, uint64_t counter, uint32_t purpose)
{
    /* Two rounds: the key is mixed first so that nearby seeds and nearby
     * counters land far apart before they are combined. */
    uint64_t key = assay_mix64(seed ^ 0x6a09e667f3bcc909ULL);
    uint64_t x = assay_mix64(key ^ assay_mix64((counter << 8) ^ (uint64_t)purpose));
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}
