/*
 * twosided.c: one-sided ops carried by RPC (FAB_OP_TWOSIDED, fab.h).
 *
 * fab_exec hands a batch with flagged ops to ship_prepare, which replaces
 * each run of flagged ops to one node (no unflagged op to that node in
 * between) by one FAB_RPC op for the handler FAB_RPC_OPS, and keeps the
 * originals. On the target, ops_handler decodes the request and applies it
 * to the own region as the tcp NIC applies a frame (fab_apply_request: the
 * journal notes its writes), or, where the own region is not reached by
 * the CPU (verbs: NIC atomics are not atomic with the CPU's), through the
 * handling worker's fabric, the NIC's loopback, as the peers' one-sided
 * ops on the same words are. Back on the initiator, ship_finish copies
 * each reply to where the original ops said: READ data, CAS and FAA old
 * values.
 *
 * Request: per op, a struct ship_op, then a WRITE's data padded to 8
 * bytes. Reply: per op in order, a READ's data padded to 8 bytes, or a CAS's
 * or FAA's old value (8 bytes); nothing for a WRITE.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/fab_internal.h"

struct ship_op {
	uint8_t kind;
	uint8_t flags;
	uint16_t rsv;
	uint32_t len;
	uint64_t off;
	uint64_t cmp;
	uint64_t swp;
};

static inline uint32_t pad8(uint32_t n) { return (n + 7u) & ~7u; }

static uint32_t req_bytes(const struct fab_op *op)
{
	return (uint32_t)sizeof(struct ship_op) + (op->kind == FAB_WRITE ? pad8(op->len) : 0);
}

static uint32_t rep_bytes(const struct fab_op *op)
{
	return op->kind == FAB_READ ? pad8(op->len) : op->kind == FAB_WRITE ? 0 : 8;
}

/* One message: the originals orig[first..] of its node, in order (their
 * indexes in idx[]), its request and its reply. */
struct ship_msg {
	uint16_t node;
	int count;
	uint8_t idx[FAB_BATCH_MAX];
	uint32_t req_len, rep_len;
	char *req;
	struct fab_rpc_reply rep;
};

struct fab_ship {
	int n, nmsg;
	struct fab_op orig[FAB_BATCH_MAX];
	struct ship_msg msg[FAB_BATCH_MAX];
};

static bool shippable(const struct fab_op *op)
{
	return (op->flags & FAB_OP_TWOSIDED) && op->kind <= FAB_FAA && !(op->flags & FAB_OP_FLUSH) &&
	       req_bytes(op) <= FAB_RPC_MAX && rep_bytes(op) <= FAB_RPC_MAX;
}

static void encode(struct ship_msg *m, const struct fab_op *orig)
{
	char *p = m->req;
	for (int k = 0; k < m->count; k++) {
		const struct fab_op *op = &orig[m->idx[k]];
		struct ship_op h = { .kind = op->kind,
				     .flags = (uint8_t)(op->flags & FAB_OP_VOLATILE),
				     .len = op->len,
				     .off = op->off,
				     .cmp = op->cmp,
				     .swp = op->swp };
		memcpy(p, &h, sizeof(h));
		p += sizeof(h);
		if (op->kind == FAB_WRITE) {
			memcpy(p, op->buf, op->len);
			memset(p + op->len, 0, pad8(op->len) - op->len);
			p += pad8(op->len);
		}
	}
}

int fab_ship_prepare(struct fab_batch *b, int n, struct fab_ship **out)
{
	struct fab_ship *s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->n = n;
	s->nmsg = 0;
	memcpy(s->orig, b->ops, sizeof(b->ops[0]) * (size_t)n);
	/* Group: open[node] is the message still taking that node's ops. An
	 * op that does not fit it goes one-sided, which orders it after the
	 * message (a second message would not be ordered with the first). */
	int open[FAB_MAX_NODES];
	int8_t msg_of[FAB_BATCH_MAX];
	for (int i = 0; i < FAB_MAX_NODES; i++)
		open[i] = -1;
	for (int i = 0; i < n; i++) {
		const struct fab_op *op = &s->orig[i];
		int *o = &open[op->node];
		msg_of[i] = -1;
		if (!shippable(op)) {
			*o = -1;
			continue;
		}
		struct ship_msg *m = *o >= 0 ? &s->msg[*o] : NULL;
		if (m && (m->req_len + req_bytes(op) > FAB_RPC_MAX ||
			  m->rep_len + rep_bytes(op) > FAB_RPC_MAX)) {
			*o = -1;
			continue;
		}
		if (!m) {
			*o = s->nmsg++;
			m = &s->msg[*o];
			*m = (struct ship_msg){ .node = op->node };
		}
		m->idx[m->count++] = (uint8_t)i;
		m->req_len += req_bytes(op);
		m->rep_len += rep_bytes(op);
		msg_of[i] = (int8_t)*o;
	}
	if (s->nmsg == 0) {
		free(s);
		*out = NULL;
		for (int i = 0; i < n; i++)
			b->ops[i].flags &= (uint8_t)~FAB_OP_TWOSIDED;
		return n;
	}
	size_t bytes = 0;
	for (int k = 0; k < s->nmsg; k++)
		bytes += (size_t)s->msg[k].req_len + s->msg[k].rep_len;
	char *mem = malloc(bytes ? bytes : 1);
	if (!mem) {
		free(s);
		return -ENOMEM;
	}
	for (int k = 0; k < s->nmsg; k++) {
		struct ship_msg *m = &s->msg[k];
		m->req = mem;
		mem += m->req_len;
		m->rep = (struct fab_rpc_reply){ .buf = m->rep_len ? mem : NULL,
						 .cap = m->rep_len,
						 .status = -EINPROGRESS };
		mem += m->rep_len;
		encode(m, s->orig);
	}
	/* The batch as it goes out: each message where its first op was. */
	int k = 0;
	for (int i = 0; i < n; i++) {
		if (msg_of[i] < 0) {
			b->ops[k] = s->orig[i];
			b->ops[k++].flags &= (uint8_t)~FAB_OP_TWOSIDED;
			continue;
		}
		struct ship_msg *m = &s->msg[msg_of[i]];
		if (m->idx[0] != i)
			continue;
		b->ops[k++] = (struct fab_op){ .kind = FAB_RPC, .tag = s->orig[i].tag,
					       .node = m->node, .off = FAB_RPC_OPS, .buf = m->req,
					       .len = m->req_len, .rep = &m->rep };
	}
	*out = s;
	return k;
}

/* The tags of message m's ops, a bit each. */
static uint32_t msg_tags(const struct fab_ship *s, const struct ship_msg *m)
{
	uint32_t tags = 0;
	for (int k = 0; k < m->count; k++)
		tags |= 1u << (s->orig[m->idx[k]].tag % FAB_TAGS);
	return tags;
}

void fab_ship_count(const struct fab_ship *s, struct fab_stats *st)
{
	for (int k = 0; k < s->nmsg; k++) {
		uint32_t tags = msg_tags(s, &s->msg[k]);
		for (int t = 0; t < FAB_TAGS; t++)
			st->tag_rpcs[t] += (tags >> t) & 1u;
	}
}

int fab_ship_finish(struct fab_batch *b, struct fab_ship *s)
{
	int rc = 0;
	for (int k = 0; k < s->nmsg; k++) {
		struct ship_msg *m = &s->msg[k];
		int st = m->rep.status;
		if (st >= 0 && m->rep.len != m->rep_len)
			st = -EPROTO;
		if (st < 0) {
			b->failed |= 1ull << (m->node & 63);
			if (!rc)
				rc = st == -EINPROGRESS ? -EHOSTDOWN : st;
			continue;
		}
		const char *p = m->rep.buf;
		for (int j = 0; j < m->count; j++) {
			const struct fab_op *op = &s->orig[m->idx[j]];
			if (op->kind == FAB_READ) {
				memcpy(op->buf, p, op->len);
			} else if (op->kind != FAB_WRITE && op->old) {
				memcpy(op->old, p, 8);
			}
			p += rep_bytes(op);
		}
	}
	free(s->msg[0].req);
	free(s);
	return rc;
}

/* The target's side: apply the request's ops to the own region. */
/* The ops through c's worker's own endpoint to this node (the loopback QP
 * on verbs), waiting for them by polling that worker: a handler cannot
 * park, and the round trip does not leave the host. */
static int apply_through_fabric(struct fab_rpc_call *c, struct fab_op *const *ops, int n)
{
	struct fab_batch b;
	fab_batch_init(&b, c->fw, (struct fab_waiter){ 0 }, NULL);
	for (int i = 0; i < n; i++)
		b.ops[i] = *ops[i];
	b.n = n;
	return fab_exec(&b);
}

int fab_ops_handler(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	struct fab *f = arg;
	struct fab_op ops[FAB_BATCH_MAX], *opp[FAB_BATCH_MAX];
	uint64_t olds[FAB_BATCH_MAX];
	uint32_t old_at[FAB_BATCH_MAX];
	const char *p = c->req, *end = p + c->len;
	char *r = c->resp;
	uint32_t rlen = 0;
	int n = 0;
	while (p < end) {
		struct ship_op h;
		if (n == FAB_BATCH_MAX || (size_t)(end - p) < sizeof(h))
			return -EPROTO;
		memcpy(&h, p, sizeof(h));
		p += sizeof(h);
		if (h.kind > FAB_FAA || h.len == 0 ||
		    ((h.kind == FAB_CAS || h.kind == FAB_FAA) && (h.len != 8 || (h.off & 7))))
			return -EPROTO;
		struct fab_op *op = &ops[n];
		*op = (struct fab_op){ .kind = h.kind, .flags = h.flags & FAB_OP_VOLATILE,
				       .node = c->to, .len = h.len, .off = h.off, .cmp = h.cmp,
				       .swp = h.swp };
		const uint32_t rb = rep_bytes(op);
		if (rb > c->cap - rlen)
			return -EMSGSIZE;
		if (h.kind == FAB_WRITE) {
			if ((size_t)(end - p) < pad8(h.len))
				return -EPROTO;
			op->buf = (void *)p;
			p += pad8(h.len);
		} else if (h.kind == FAB_READ) {
			op->buf = r + rlen;
		} else {
			op->old = &olds[n];
		}
		old_at[n] = rlen;
		rlen += rb;
		opp[n] = op;
		n++;
	}
	int rc = 0;
	if (n && f->peers[c->to].direct)
		rc = fab_apply_request(f, opp, n);
	else if (n)
		rc = apply_through_fabric(c, opp, n);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		if (ops[i].kind == FAB_CAS || ops[i].kind == FAB_FAA)
			memcpy(r + old_at[i], &olds[i], 8); /* the reply need not be aligned */
	*len = rlen;
	return 0;
}
