/*
 * map.c: keys to slots to nodes on the client side. The slot of a key is
 * placement's (placement/placement.h), the function the server uses, so
 * the client agrees with the server on every key; the slot -> node table
 * comes from the server's RCKV NODES.
 */
#include "client/rckv.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "placement/placement.h"

/* One keyslot function for the server and the client (placement/). */
uint16_t rckv_crc16(const void *buf, size_t len)
{
	return pl_crc16(buf, len);
}

unsigned rckv_keyslot(const char *key, size_t len)
{
	return pl_keyslot(key, len);
}

void rckv_map_single(struct rckv_map *m, const char *host, int port)
{
	memset(m, 0, sizeof(*m));
	m->nnodes = 1;
	m->nodes[0].id = 1;
	snprintf(m->nodes[0].host, sizeof(m->nodes[0].host), "%s", host);
	m->nodes[0].port = port;
	/* owner[] is already all zero: node 0 owns every slot */
}

static int fail(char *err, size_t errlen, int code, const char *fmt, int a, int b)
{
	if (err && errlen)
		snprintf(err, errlen, fmt, a, b);
	return code;
}

/* A string field of a reply: bulk or status. */
static int reply_str(const redisReply *r, char *dst, size_t cap)
{
	if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)
		return -1;
	if (r->len >= cap)
		return -1;
	memcpy(dst, r->str, r->len);
	dst[r->len] = '\0';
	return 0;
}

int rckv_map_from_reply(const redisReply *r, struct rckv_map *m, char *err, size_t errlen)
{
	memset(m, 0, sizeof(*m));
	memset(m->owner, RCKV_NO_OWNER, sizeof(m->owner));
	if (r->type != REDIS_REPLY_ARRAY)
		return fail(err, errlen, RCKV_EPROTO, "RCKV NODES: the reply is not an array", 0, 0);
	if (r->elements == 0)
		return fail(err, errlen, RCKV_EPROTO, "RCKV NODES: the reply lists no node", 0, 0);
	if (r->elements > RCKV_MAX_NODES)
		return fail(err, errlen, RCKV_ERANGE, "RCKV NODES: %d nodes, at most %d supported",
			    (int)r->elements, RCKV_MAX_NODES);
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];
		struct rckv_node *n = &m->nodes[i];

		/* A sixth element and after (the node's state) are not needed. */
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 5 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[2]->type != REDIS_REPLY_INTEGER ||
		    e->element[4]->type != REDIS_REPLY_ARRAY ||
		    reply_str(e->element[1], n->host, sizeof(n->host)) != 0 ||
		    reply_str(e->element[3], n->fabric, sizeof(n->fabric)) != 0)
			return fail(err, errlen, RCKV_EPROTO,
				    "RCKV NODES: entry %d is not [id, host, port, fabric, ranges]",
				    (int)i, 0);
		n->id = (int)e->element[0]->integer;
		if (e->element[2]->integer < 1 || e->element[2]->integer > 65535)
			return fail(err, errlen, RCKV_EPROTO, "RCKV NODES: node %d has port %d",
				    n->id, (int)e->element[2]->integer);
		n->port = (int)e->element[2]->integer;
		const redisReply *ranges = e->element[4];
		for (size_t k = 0; k < ranges->elements; k++) {
			const redisReply *rg = ranges->element[k];
			if (rg->type != REDIS_REPLY_ARRAY || rg->elements != 2 ||
			    rg->element[0]->type != REDIS_REPLY_INTEGER ||
			    rg->element[1]->type != REDIS_REPLY_INTEGER)
				return fail(err, errlen, RCKV_EPROTO,
					    "RCKV NODES: node %d: range %d is not [start, end]", n->id,
					    (int)k);
			long long s = rg->element[0]->integer, t = rg->element[1]->integer;
			if (s < 0 || t >= RCKV_SLOTS || s > t)
				return fail(err, errlen, RCKV_ERANGE,
					    "RCKV NODES: node %d: bad slot range starting at %d", n->id,
					    (int)s);
			for (long long sl = s; sl <= t; sl++) {
				if (m->owner[sl] != RCKV_NO_OWNER)
					return fail(err, errlen, RCKV_ERANGE,
						    "RCKV NODES: slot %d is claimed twice (node %d)",
						    (int)sl, n->id);
				m->owner[sl] = (uint8_t)i;
			}
		}
		m->nnodes = (int)i + 1;
	}
	for (int s = 0; s < RCKV_SLOTS; s++)
		if (m->owner[s] == RCKV_NO_OWNER)
			return fail(err, errlen, RCKV_ERANGE, "RCKV NODES: slot %d has no owner", s, 0);
	return 0;
}

int rckv_map_fetch(redisContext *c, struct rckv_map *m, char *err, size_t errlen)
{
	redisReply *r = redisCommand(c, "RCKV NODES");
	int rc;

	if (!r) {
		/* a read that timed out shows as EAGAIN's text: say what it means */
		const char *why = c->errstr[0] ? c->errstr : "I/O error";
		if (strstr(why, "temporarily unavailable"))
			why = "no reply within the timeout";
		if (err && errlen)
			snprintf(err, errlen, "RCKV NODES: %s", why);
		return RCKV_ECONNECT;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		/* Redis 7: "ERR unknown command 'RCKV', with args beginning with: ..." */
		rc = strncasecmp(r->str, "ERR unknown command", 19) == 0 ? RCKV_ENOTRCKV
									 : RCKV_EREPLY;
		if (err && errlen)
			snprintf(err, errlen, "RCKV NODES: %s", r->str);
		freeReplyObject(r);
		return rc;
	}
	rc = rckv_map_from_reply(r, m, err, errlen);
	freeReplyObject(r);
	return rc;
}
