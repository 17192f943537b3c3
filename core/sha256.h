/*
 * sha256.h - SHA-256 (FIPS 180-4), for weights hashes and content stamps.
 */
#ifndef ASSAY_SHA256_H
#define ASSAY_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct assay_sha256 {
    uint32_t h[8];
    uint64_t n_bytes;
    uint8_t block[64];
    size_t n_block;
    bool portable; /* the portable loop, not the SHA extensions (init sets it
                      by the CPU; a test may set it after init) */
};

/* Whether this CPU (and this build) has the SHA extensions init uses. */
bool assay_sha256_accelerated(void);

void assay_sha256_init(struct assay_sha256 *ctx);
void assay_sha256_update(struct assay_sha256 *ctx, const void *data, size_t n);
void assay_sha256_final(struct assay_sha256 *ctx, uint8_t digest[32]);

/* Lower-case hex of a 32-byte digest into out (65 bytes with the NUL). */
void assay_sha256_hex(const uint8_t digest[32], char out[65]);

#endif
