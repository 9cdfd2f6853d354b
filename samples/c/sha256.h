/* SHA-256 (FIPS 180-4), small and dependency-free, for the reference app's /upload.
 * Written for Ember; public domain. */
#ifndef EMBER_SAMPLE_SHA256_H
#define EMBER_SAMPLE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t state[8];
    uint64_t bytes;           /* message length so far */
    unsigned char block[64];  /* a partial block waiting for more input */
    size_t used;
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
/* Writes the 32-byte digest; the context must be initialised again before reuse. */
void sha256_final(sha256_ctx *c, unsigned char digest[32]);
/* The digest as 64 lower-case hex digits and a NUL. */
void sha256_hex(const unsigned char digest[32], char out[65]);

#endif
