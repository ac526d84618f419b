/* SHA-256 (FIPS 180-4), for the plugin fingerprints in manifest.json: which exact file
 * ran is part of a run's record, and a hash tells two builds of one plugin version apart.
 * Small and portable; it is not constant-time and is not meant for anything secret. */
#ifndef GB_CORE_SHA256_H
#define GB_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct gb_sha256 {
    uint32_t state[8];
    uint64_t length;         /* bytes hashed so far */
    unsigned char block[64];
    size_t used;             /* bytes waiting in block */
} gb_sha256;

void gb_sha256_init(gb_sha256 *h);
void gb_sha256_update(gb_sha256 *h, const void *data, size_t bytes);
/* Writes the 32-byte digest; `h` must be initialised again before reuse. */
void gb_sha256_final(gb_sha256 *h, unsigned char digest[32]);

/* The digest of `bytes` bytes at `data` as 64 lower-case hex digits and a NUL. */
void gb_sha256_hex(const void *data, size_t bytes, char hex[65]);
/* The digest of the file at `path` as hex; 0, or -1 (errno set) when it cannot be read. */
int gb_sha256_file(const char *path, char hex[65]);

#endif
