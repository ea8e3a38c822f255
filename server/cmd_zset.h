/*
 * cmd_zset.h: what cmd_zset.c shares with cmd_zsetop.c (the handlers'
 * prototypes are in command.h). Owner: the coroutine running the
 * command's transaction, as for every handler.
 */
#ifndef RCKV_SRV_CMD_ZSET_H
#define RCKV_SRV_CMD_ZSET_H

#include <stdbool.h>
#include <stddef.h>

#include "server/command.h"
#include "server/zset.h"

/* Elements with their members copied (malloc'd): a result that outlives
 * changes to the zset it came from. */
struct zlist {
	struct zs_elem *e;
	size_t n, cap;
};
int zlist_add(struct zlist *l, double s, const char *m, size_t ml);
void zlist_free(struct zlist *l);

/* zs_open / zs_init with the server's zset-max-listpack-* limits. */
int zcmd_open(struct cmd_ctx *c, const char *key, size_t klen, struct zset *z);
void zcmd_init(struct cmd_ctx *c, const char *key, size_t klen, struct zset *z);
/* Redis's float argument parse (getDoubleFromObject): 0, or -1. */
int zcmd_parse_score(const struct resp_arg *a, double *out);
/* One element (with its score: [m, s] in RESP3, m s in RESP2), or a
 * list of them as one array. */
void zcmd_reply_elem(struct cmd_ctx *c, const char *m, size_t ml, double s, bool withscores);
void zcmd_reply_list(struct cmd_ctx *c, const struct zlist *l, bool withscores);
/* Key overwritten by the elements of l (deleted when l is empty); the
 * old value's parts, if any, are left to the expiry scan (coll.h (1)). */
int zcmd_store(struct cmd_ctx *c, const char *key, size_t klen, const struct zlist *l);

#endif
