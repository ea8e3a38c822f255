/*
 * sha256: SHA-256 (FIPS 180-4), for ACL passwords: rckv keeps a user's
 * passwords as the lower-case hex SHA-256 of each, as Redis does, so that
 * ACL LIST and ACL GETUSER show the same "#<hash>" and ACL SETUSER takes a
 * Redis user's hashes unchanged.
 */
#ifndef RCKV_SRV_SHA256_H
#define RCKV_SRV_SHA256_H

#include <stddef.h>

/* out: 64 hex digits and a NUL. Pure; any thread. */
void sha256_hex(const void *data, size_t len, char out[65]);

#endif
