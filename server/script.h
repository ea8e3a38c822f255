/*
 * script: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, as Redis 7
 * documents them, where every script is one serializable transaction
 * (DESIGN.md section 10; server/script.c says how).
 *
 * A node keeps one script cache (SHA-1 -> body), shared by its workers;
 * each worker keeps a pool of Lua VMs (server/script_vm.h) and lends one
 * to each running script.
 */
#ifndef RCKV_SRV_SCRIPT_H
#define RCKV_SRV_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

#include "resp/resp.h"

struct script_cache;
struct script_pool;

/* The node's cache; NULL if out of memory. Any thread; freed after the
 * workers stopped. */
struct script_cache *script_cache_create(void);
void script_cache_free(struct script_cache *sc);

/* Scripts cached and the bytes of their bodies (INFO memory). Any thread. */
void script_cache_stats(struct script_cache *sc, uint64_t *count, uint64_t *bytes);

/* A worker's pool of VMs; NULL if out of memory. Used on the worker's
 * thread only; freed after it stopped. */
struct script_pool *script_pool_create(void);
void script_pool_free(struct script_pool *sp);

/* The key positions of an EVAL-family request: argv[3 .. 3+numkeys), or 0
 * when numkeys is not a valid count (the handler then says why). */
int script_getkeys(int argc, const struct resp_arg *argv, int *idx, int max);

#endif
