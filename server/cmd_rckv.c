/*
 * cmd_rckv.c: RCKV, rckv's own view of the cluster layout (DESIGN.md
 * section 7). Clients need no routing: any node serves any key, so rckv
 * does not implement Redis's CLUSTER family (cluster-aware clients would
 * then refuse cross-slot MULTI). Tools that want to know placement ask:
 *   RCKV NODES          array of [id, host, port, fabric-address, [[start, end], ...],
 *                       state]: the ranges it is the primary of; state up, out,
 *                       joining or late (server/membership.h)
 *   RCKV KEYSLOT key    the key's slot (CRC16 as Redis Cluster, hash tags honoured)
 *   RCKV KEYNODE key    the id of the node that owns the key (the primary)
 *   RCKV SLOTS          array of [start, end, [primary, backup, ...]] per range
 *                       of slots with one replica set (`replicas` N)
 *   RCKV COPIES key     the key's copy on each node of its set, primary first:
 *                       [node, version, value or nil], read with no lock
 *   RCKV REBALANCE      primaries back to rejoined nodes (a configuration change)
 */
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/exec.h"
#include "server/command.h"
#include "server/membership.h"
#include "server/node.h"
#include "server/slots.h"
#include "server/worker.h"

/* A node's state in the configuration (membership.h): "up", "out" (a
 * failover took it out), "joining" (copying its slots back), "late"
 * (copied, its primaries not yet moved back). Without replicas, "up". */
static const char *node_state(struct node *n, int id)
{
	if (!n->membership)
		return "up";
	struct mb_view v;
	mb_view(n->membership, &v);
	uint64_t b = 1ull << id;
	return (v.out & b) ? "out" : (v.joining & b) ? "joining" : (v.late & b) ? "late" : "up";
}

static void reply_nodes(struct cmd_ctx *c, const struct slot_map *m, const struct pl_map *pm)
{
	resp_array(c->out, m->nnodes);
	for (int i = 0; i < m->nnodes; i++) {
		const struct slot_node *sn = &m->nodes[i];
		/* ranges of consecutive slots owned by node i */
		int nranges = 0;
		for (unsigned s = 0; s < SLOT_COUNT; s++)
			if (pl_slot_primary(pm, s) == sn->id &&
			    (s == 0 || pl_slot_primary(pm, s - 1) != sn->id))
				nranges++;
		resp_array(c->out, 6);
		resp_int(c->out, sn->id);
		resp_bulk_cstr(c->out, sn->host);
		resp_int(c->out, sn->port);
		resp_bulk_cstr(c->out, sn->fabric_addr);
		resp_array(c->out, nranges);
		for (unsigned s = 0; s < SLOT_COUNT; s++) {
			if (pl_slot_primary(pm, s) != sn->id ||
			    (s > 0 && pl_slot_primary(pm, s - 1) == sn->id))
				continue;
			unsigned e = s;
			while (e + 1 < SLOT_COUNT && pl_slot_primary(pm, e + 1) == sn->id)
				e++;
			resp_array(c->out, 2);
			resp_int(c->out, s);
			resp_int(c->out, e);
		}
		resp_bulk_cstr(c->out, node_state(c->node, sn->id));
	}
}

static bool same_set(const struct pl_set *a, const struct pl_set *b)
{
	return a->n == b->n && memcmp(a->node, b->node, a->n * sizeof(a->node[0])) == 0;
}

static void reply_slots(struct cmd_ctx *c, const struct pl_map *pm)
{
	int nranges = 0;
	for (unsigned s = 0; s < SLOT_COUNT; s++)
		if (s == 0 || !same_set(pl_slot_set(pm, s), pl_slot_set(pm, s - 1)))
			nranges++;
	resp_array(c->out, nranges);
	for (unsigned s = 0; s < SLOT_COUNT;) {
		const struct pl_set *set = pl_slot_set(pm, s);
		unsigned e = s;
		while (e + 1 < SLOT_COUNT && same_set(pl_slot_set(pm, e + 1), set))
			e++;
		resp_array(c->out, 3);
		resp_int(c->out, s);
		resp_int(c->out, e);
		resp_array(c->out, set->n);
		for (int r = 0; r < set->n; r++)
			resp_int(c->out, set->node[r]);
		s = e + 1;
	}
}

static void reply_copies(struct cmd_ctx *c, const char *key, size_t klen)
{
	struct cc_copy copies[PL_MAX_REPLICAS];
	int n = cc_read_copies(c->w->ccw, key, klen, copies);
	if (n < 0) {
		resp_error(c->out, "ERR out of memory");
		return;
	}
	resp_array(c->out, n);
	for (int r = 0; r < n; r++) {
		const struct cc_copy *cp = &copies[r];
		resp_array(c->out, 3);
		resp_int(c->out, cp->node);
		if (cp->state == CC_COPY_ERROR) {
			resp_null(c->out);
			resp_error(c->out, "ERR the node did not answer");
			continue;
		}
		resp_int(c->out, cp->state == CC_COPY_FOUND ? (long long)cp->ver : 0);
		if (cp->state == CC_COPY_FOUND)
			resp_bulk(c->out, cp->val, cp->vlen);
		else
			resp_null(c->out);
		free(cp->val);
	}
}

/* RCKV LOCKS: up to LOCKS_MAX held lock words of this node's region. */
#define LOCKS_MAX 100

struct locks_out {
	char line[LOCKS_MAX][160];
	int n;
};

static int note_lock(void *arg, const char *key, uint32_t klen, uint64_t lock, uint64_t bucket,
		     bool absent)
{
	struct locks_out *o = arg;
	if (key)
		snprintf(o->line[o->n], sizeof(o->line[0]), "key %.*s lock 0x%016llx%s",
			 (int)(klen > 100 ? 100 : klen), key, (unsigned long long)lock,
			 absent ? " (absent placeholder)" : "");
	else
		snprintf(o->line[o->n], sizeof(o->line[0]), "bucket %llu lock 0x%016llx",
			 (unsigned long long)bucket, (unsigned long long)lock);
	return ++o->n == LOCKS_MAX;
}

static void reply_locks(struct cmd_ctx *c)
{
	struct locks_out *o = calloc(1, sizeof(*o));
	if (!o) {
		resp_error(c->out, "ERR out of memory");
		return;
	}
	st_scan_locks(c->node->cc.region, note_lock, o);
	resp_array(c->out, o->n);
	for (int i = 0; i < o->n; i++)
		resp_bulk(c->out, o->line[i], strlen(o->line[i]));
	free(o);
}

int cmd_rckv(struct cmd_ctx *c)
{
	const struct slot_map *m = ck_pr_load_ptr(&c->node->slots);
	const char *sub = c->argv[1].p;
	if (strcasecmp(sub, "nodes") == 0) {
		reply_nodes(c, m, cc_placement_begin(c->w->ccw));
		cc_placement_end(c->w->ccw);
	} else if (strcasecmp(sub, "keyslot") == 0) {
		resp_int(c->out, pl_keyslot(c->argv[2].p, c->argv[2].len));
	} else if (strcasecmp(sub, "keynode") == 0) {
		const struct pl_map *pm = cc_placement_begin(c->w->ccw);
		resp_int(c->out, pl_primary(pm, c->argv[2].p, c->argv[2].len));
		cc_placement_end(c->w->ccw);
	} else if (strcasecmp(sub, "slots") == 0) {
		reply_slots(c, cc_placement_begin(c->w->ccw));
		cc_placement_end(c->w->ccw);
	} else if (strcasecmp(sub, "copies") == 0) {
		reply_copies(c, c->argv[2].p, c->argv[2].len);
	} else if (strcasecmp(sub, "locks") == 0) {
		reply_locks(c);
	} else if (strcasecmp(sub, "rebalance") == 0) {
		if (!c->node->membership) {
			resp_error(c->out, "ERR RCKV REBALANCE needs a cluster with replicas 2 or more");
		} else {
			struct mb_view v;
			mb_view(c->node->membership, &v);
			if (v.late)
				mb_rebalance(c->node->membership);
			resp_status(c->out, v.late ? "OK" : "OK nothing to move back");
		}
	} else {
		static const char *const help[] = {
			"RCKV <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"NODES",
			"    Return the nodes: id, host, port, fabric address, owned slot ranges, state.",
			"KEYSLOT <key>",
			"    Return the hash slot of <key>.",
			"KEYNODE <key>",
			"    Return the id of the node that owns <key> (its primary).",
			"SLOTS",
			"    Return the slot ranges, each with its replica set, primary first.",
			"COPIES <key>",
			"    Return <key>'s copy on each node of its replica set: node, version, value",
			"    (nil: absent there). Read without a lock: a diagnostic.",
			"LOCKS",
			"    Return the lock words held in this node's MemStore (up to 100; a",
			"    diagnostic for a lock left behind: its word names the holder).",
			"REBALANCE",
			"    Move the primaries back to the nodes that rejoined and copied their",
			"    slots (a configuration change; auto-rebalance yes does it at once).",
			"HELP",
			"    Print this help.",
		};
		int n = (int)(sizeof(help) / sizeof(help[0]));
		resp_array(c->out, n);
		for (int i = 0; i < n; i++)
			resp_status(c->out, help[i]);
	}
	return 0;
}
