/*
 * sha1: SHA-1 (FIPS 180-4), for the script cache's names: EVALSHA, SCRIPT
 * LOAD and redis.sha1hex name a script by the SHA-1 of its body in lower-
 * case hex, as Redis does. Not for security.
 */
#ifndef RCKV_SRV_SHA1_H
#define RCKV_SRV_SHA1_H

#include <stddef.h>

/* out: 40 hex digits and a NUL. */
void sha1_hex(const void *data, size_t len, char out[41]);

#endif
