/*
 * calvin_ring.c: calvin's ACQUIRE by one-sided WRITE into the
 * participant's request buffer, and a doorbell (calvin_ring.h has the
 * design and the invariants the code cites).
 *
 * A participant's buffer for coordinator node C (struct own_buf):
 *   NONE  --HELLO from C, no offer--> NONE (answered -ENOENT: offer one)
 *   NONE  --HELLO offering a block C allocated here--> HELD (answered:
 *           offset, slots, token)
 *   HELD  --HELLO, the block still ours (invariant (2))--> HELD (the same
 *           answer; an offered block is C's to free)
 *   HELD  --HELLO, the block freed (a flush)--> NONE, then as above
 * The coordinator allocates the block (st_alloc, one-sided, as the undo
 * log's extents), so the participant's handler runs inline and never
 * needs a coroutine of its own (under load it may have none free).
 * A coordinator's view of participant P's buffer (struct peer_buf):
 *   unknown --prepare--> asking --HELLO answered (offering a block if
 *             asked to)--> known
 *   known   --peer gone, flush_epoch moved, a doorbell without its token
 *             (invariants (1), (4))--> unknown
 * A failed HELLO is asked again after HELLO_RETRY_NS; meanwhile, and
 * whenever the view is not known, chunks go by RPC.
 */
#include "cc/calvin_ring.h"

#include <ck_pr.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc/exec_internal.h"
#include "cc/node.h"
#include "cc/sched.h"
#include "storage/st.h"

#define RING_WORKERS 256                  /* worker ids a coordinator uses slots for */
#define SLOTS_OFF 64u                     /* the first slot, from the block's start:
					     past the item header (its lock word stays
					     ST_LOCK_CLAIMED: alloc.c invariant (5)) */
#define HELLO_RETRY_NS (100ull * 1000000) /* after a failed HELLO */
#define HELLO_STALE_NS (5000ull * 1000000) /* a HELLO in flight this long is lost */

static_assert(SLOTS_OFF >= sizeof(struct st_item), "slots start past the item header");
static_assert(CALVIN_RING_SLOT_BYTES % 8 == 0, "slots are 8-aligned");

/* The wire. */
struct hello_req {
	uint32_t nslots;       /* slots the coordinator would use */
	uint32_t slot_bytes;   /* the size it would like */
	uint64_t off;          /* a block offered (allocated here by the coordinator); 0: none */
	uint32_t gen;          /* ... its generation and class */
	uint32_t cls;
};
struct hello_rep {
	uint64_t off;          /* slot 0, in the participant's region */
	uint64_t token;        /* names the buffer in doorbells */
	uint32_t nslots, slot_bytes;
};
struct bell_req {
	uint64_t token;
	uint32_t slot, len;
	uint64_t sum;          /* st_hash of the len bytes in the slot */
};

/* This node's buffer for one coordinator node (under the mutex). */
struct own_buf {
	struct st_ref ref;     /* the block; ref.off 0: none */
	uint64_t slots_off;
	uint32_t nslots, slot_bytes;
	uint64_t token;
};

/* A participant's buffer as this node knows it (under the mutex). */
struct peer_buf {
	uint64_t off;          /* slot 0; 0: not known */
	uint64_t token;
	uint32_t nslots, slot_bytes;
	uint64_t flush_epoch;  /* this node's, when learned (invariant (1)) */
	uint64_t asking_since; /* a HELLO in flight since (ns); 0: none */
	uint64_t retry_after;  /* after a failed HELLO (ns) */
};

/* A coroutine's doorbell to one node: the request and the reply stay
 * valid until the exec, and the reply is looked at by the coroutine's
 * next post there (invariant (4)). Owner worker's thread only. */
struct bell {
	struct bell_req req;
	uint64_t reply;        /* the token the participant answered */
	uint64_t sent;         /* the token of the last doorbell; 0: none pending */
};

struct ring_worker {
	struct bell bell[CALVIN_RING_SLOTS_PER_WORKER][FAB_MAX_NODES];
};

struct calvin_ring {
	struct cc_node *n;
	pthread_mutex_t mu;
	struct own_buf own[FAB_MAX_NODES];
	struct peer_buf peer[FAB_MAX_NODES];
	/* Set and used by worker w's thread only (lazily: rpc needs none). */
	struct ring_worker *rw[RING_WORKERS];
	struct calvin_ring_stats st; /* ck_pr adds; read with ck_pr loads */
};

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static bool write_mode(const struct cc_node *n)
{
	return ck_pr_load_64((uint64_t *)&n->limits.calvin_acquire) != 0;
}

struct calvin_ring *calvin_ring_create(struct cc_node *n)
{
	struct calvin_ring *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->n = n;
	pthread_mutex_init(&r->mu, NULL);
	return r;
}

void calvin_ring_destroy(struct calvin_ring *r)
{
	if (!r)
		return;
	for (int w = 0; w < RING_WORKERS; w++)
		free(r->rw[w]);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* ---- the participant's side ---- */

/* Under the mutex: the answer to a HELLO for buffer o. */
static void hello_answer(const struct own_buf *o, struct hello_rep *rep)
{
	*rep = (struct hello_rep){ .off = o->slots_off, .token = o->token, .nslots = o->nslots,
				   .slot_bytes = o->slot_bytes };
}

/* Under the mutex: adopt block ref (offered by coordinator `from`, who
 * allocated it here) as from's buffer, with up to `want` slots. */
static bool adopt_locked(struct calvin_ring *r, uint16_t from, const struct st_ref *ref,
			 uint32_t want)
{
	struct cc_node *n = r->n;
	const uint32_t size = st_class_size(ref->cls);
	if (!st_block_owned_local(n->region, ref) || size <= SLOTS_OFF)
		return false;
	uint32_t nslots = (size - SLOTS_OFF) / CALVIN_RING_SLOT_BYTES;
	if (nslots > want)
		nslots = want;
	if (nslots == 0)
		return false;
	const uint64_t inc = st_region_header(n->region)->incarnation;
	uint64_t token = mix(inc * 0x9e3779b97f4a7c15ull ^ ref->off) ^ ((uint64_t)ref->gen << 32);
	r->own[from] = (struct own_buf){ .ref = *ref, .slots_off = ref->off + SLOTS_OFF,
					 .nslots = nslots, .slot_bytes = CALVIN_RING_SLOT_BYTES,
					 .token = token ? token : 1 };
	ck_pr_inc_64(&r->st.buffers);
	return true;
}

/* HELLO: this node's buffer for the caller; -ENOENT without one and no
 * offer (the caller then allocates a block here and offers it). */
static int h_hello(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	struct calvin_ring *r = arg;
	struct cc_node *n = r->n;
	struct hello_req rq;
	*len = 0;
	if (c->len < sizeof(rq) || c->cap < sizeof(struct hello_rep) || c->from >= FAB_MAX_NODES ||
	    c->from == n->id)
		return -EINVAL;
	memcpy(&rq, c->req, sizeof(rq));
	if (rq.nslots == 0 || rq.cls > UINT8_MAX)
		return -EINVAL;
	pthread_mutex_lock(&r->mu);
	struct own_buf *o = &r->own[c->from];
	if (o->ref.off && !st_block_owned_local(n->region, &o->ref)) { /* invariant (2) */
		cc_log(n, CC_LOG_NOTICE, "calvin: the request buffer for node %u was freed (a "
		       "flush): it offers a new one", c->from);
		*o = (struct own_buf){ 0 };
	}
	int rc = 0;
	if (!o->ref.off) {
		const struct st_ref ref = { .node = n->id, .cls = (uint8_t)rq.cls, .gen = rq.gen,
					    .off = rq.off };
		if (!rq.off)
			rc = -ENOENT;
		else if (!adopt_locked(r, c->from, &ref, rq.nslots))
			rc = -EINVAL; /* not a block of this node's it allocated */
	}
	if (rc == 0) {
		hello_answer(o, c->resp);
		*len = sizeof(struct hello_rep);
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

/* The doorbell: the slot's bytes to acquire_take (invariant (3)). */
static int h_bell(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	struct calvin_ring *r = arg;
	struct cc_node *n = r->n;
	struct bell_req rq;
	*len = 0;
	if (c->len < sizeof(rq) || c->from >= FAB_MAX_NODES)
		return -EINVAL;
	memcpy(&rq, c->req, sizeof(rq));
	pthread_mutex_lock(&r->mu);
	const struct own_buf o = r->own[c->from];
	pthread_mutex_unlock(&r->mu);
	if (!o.ref.off || o.token != rq.token) {
		/* Not a buffer this node holds (any more): the coordinator
		 * asks again (invariant (4)); its transaction goes again. */
		ck_pr_inc_64(&r->st.refused);
		return -EBUSY;
	}
	if (rq.slot >= o.nslots || rq.len > o.slot_bytes)
		return -EINVAL;
	char bytes[CALVIN_RING_SLOT_BYTES];
	memcpy(bytes, (const char *)st_region_base(n->region) + o.slots_off +
			      (uint64_t)rq.slot * o.slot_bytes,
	       rq.len);
	if (st_hash(bytes, rq.len) != rq.sum) {
		ck_pr_inc_64(&r->st.refused);
		return -EBUSY;
	}
	ck_pr_inc_64(&r->st.doorbells);
	int rc = calvin_acquire_take(n, c->from, fab_worker_id(c->fw), bytes, rq.len);
	if (rc < 0)
		return rc;
	if (c->cap >= sizeof(rq.token)) {
		memcpy(c->resp, &rq.token, sizeof(rq.token));
		*len = sizeof(rq.token);
	}
	return rc;
}

int calvin_ring_attach(struct calvin_ring *r, char *err, size_t errlen)
{
	if (fab_rpc_register(r->n->fab, CALVIN_RPC_RING_HELLO, "calvin-ring-hello", h_hello, r) ||
	    fab_rpc_register(r->n->fab, CALVIN_RPC_RING_BELL, "calvin-ring-bell", h_bell, r)) {
		snprintf(err, errlen, "calvin: cannot register the request buffers' RPC handlers");
		return -EINVAL;
	}
	return 0;
}

/* ---- the coordinator's side ---- */

/* Under the mutex: forget peer nd's buffer (if it is still `token`; 0:
 * whatever it is). */
static void forget_locked(struct calvin_ring *r, uint16_t nd, uint64_t token)
{
	struct peer_buf *p = &r->peer[nd];
	if (token && p->token != token)
		return;
	p->off = 0;
	p->token = 0;
}

/* HELLO to every node of `ask` (with the block offers[nd] if its off is
 * set), one round trip: rr and rep get the answers. */
static void hello_round(struct calvin_ring *r, struct txn *t, uint64_t ask,
			const struct st_ref *offers, struct fab_rpc_reply *rr, struct hello_rep *rep)
{
	int nw = r->n->nworkers > 0 ? r->n->nworkers : 1;
	if (nw > RING_WORKERS)
		nw = RING_WORKERS;
	struct hello_req rq[FAB_MAX_NODES];
	for (int nd = 0; nd < FAB_MAX_NODES; nd++) {
		if (!(ask & (1ull << nd)))
			continue;
		rq[nd] = (struct hello_req){ .nslots = (uint32_t)nw * CALVIN_RING_SLOTS_PER_WORKER,
					     .slot_bytes = CALVIN_RING_SLOT_BYTES,
					     .off = offers[nd].off, .gen = offers[nd].gen,
					     .cls = offers[nd].cls };
		rr[nd] = (struct fab_rpc_reply){ .buf = &rep[nd], .cap = sizeof(rep[nd]) };
		fab_rpc(&t->batch, (uint16_t)nd, CALVIN_RPC_RING_HELLO, &rq[nd], sizeof(rq[nd]),
			&rr[nd]);
		ck_pr_inc_64(&r->st.hellos);
	}
	(void)fab_exec(&t->batch); /* each reply's status says */
}

/* A block on nd for this node's slots (as many as one HELLO asks for, up
 * to CALVIN_RING_MAX_BYTES), its data word marking it as no item (st.h's
 * ABSENT, as the undo log's extents): 0 or an error. */
static int offer_alloc(struct calvin_ring *r, struct txn *t, uint16_t nd, struct st_ref *ref)
{
	int nw = r->n->nworkers > 0 ? r->n->nworkers : 1;
	uint64_t bytes = SLOTS_OFF + (uint64_t)(nw > RING_WORKERS ? RING_WORKERS : nw) *
					     CALVIN_RING_SLOTS_PER_WORKER * CALVIN_RING_SLOT_BYTES;
	if (bytes > CALVIN_RING_MAX_BYTES)
		bytes = CALVIN_RING_MAX_BYTES;
	const uint32_t vlen = (uint32_t)bytes - (uint32_t)sizeof(struct st_item);
	int rc = st_alloc(&t->batch, r->n->layout, nd, 0, vlen, ref);
	if (rc)
		return rc;
	const uint64_t data = st_make_data(vlen, ST_F_ABSENT);
	return fab_write1(&t->batch, nd, ref->off + offsetof(struct st_item, data), &data, 8);
}

/* Is HELLO answer h, from a node of region size `size`, a usable buffer? */
static bool answer_ok(const struct fab_rpc_reply *rr, const struct hello_rep *h, uint64_t size)
{
	return rr->status >= 0 && rr->len == sizeof(*h) && h->token && h->nslots &&
	       h->slot_bytes && h->slot_bytes % 8 == 0 && h->off % 8 == 0 && h->off < size &&
	       (uint64_t)h->nslots * h->slot_bytes <= size - h->off;
}

void calvin_ring_prepare(struct calvin_ring *r, struct txn *t, uint64_t nodes)
{
	struct cc_node *n = r->n;
	if (!nodes || !write_mode(n))
		return;
	const uint64_t now = sched_now_ns(), fe = ck_pr_load_64(&n->flush_epoch);
	uint64_t ask = 0;
	pthread_mutex_lock(&r->mu);
	for (int nd = 0; nd < FAB_MAX_NODES; nd++) {
		struct peer_buf *p = &r->peer[nd];
		if (!(nodes & (1ull << nd)) || (p->off && p->flush_epoch == fe))
			continue;
		if ((p->asking_since && now - p->asking_since < HELLO_STALE_NS) ||
		    now < p->retry_after)
			continue;
		p->asking_since = now;
		ask |= 1ull << nd;
	}
	pthread_mutex_unlock(&r->mu);
	if (!ask)
		return;
	struct st_ref offers[FAB_MAX_NODES] = { 0 };
	struct hello_rep rep[FAB_MAX_NODES];
	struct fab_rpc_reply rr[FAB_MAX_NODES];
	hello_round(r, t, ask, offers, rr, rep);
	/* A participant without a buffer for this node: a block there, offered. */
	uint64_t offer = 0;
	for (int nd = 0; nd < FAB_MAX_NODES; nd++)
		if ((ask & (1ull << nd)) && rr[nd].status == -ENOENT &&
		    offer_alloc(r, t, (uint16_t)nd, &offers[nd]) == 0)
			offer |= 1ull << nd;
	if (offer) {
		hello_round(r, t, offer, offers, rr, rep);
		for (int nd = 0; nd < FAB_MAX_NODES; nd++)
			if ((offer & (1ull << nd)) &&
			    !(rr[nd].status >= 0 && rr[nd].len == sizeof(rep[nd]) &&
			      rep[nd].off == offers[nd].off + SLOTS_OFF))
				(void)st_free(&t->batch, n->layout, &offers[nd], 0); /* not taken */
	}
	const uint64_t done = sched_now_ns();
	pthread_mutex_lock(&r->mu);
	for (int nd = 0; nd < FAB_MAX_NODES; nd++) {
		if (!(ask & (1ull << nd)))
			continue;
		struct peer_buf *p = &r->peer[nd];
		p->asking_since = 0;
		if (!answer_ok(&rr[nd], &rep[nd], fab_region_size(n->fab, (uint16_t)nd))) {
			p->retry_after = done + HELLO_RETRY_NS;
			continue;
		}
		*p = (struct peer_buf){ .off = rep[nd].off, .token = rep[nd].token,
					.nslots = rep[nd].nslots, .slot_bytes = rep[nd].slot_bytes,
					.flush_epoch = fe };
	}
	pthread_mutex_unlock(&r->mu);
}

static struct ring_worker *worker_state(struct calvin_ring *r, int w)
{
	if (w < 0 || w >= RING_WORKERS)
		return NULL;
	if (!r->rw[w])
		r->rw[w] = calloc(1, sizeof(*r->rw[w]));
	return r->rw[w];
}

bool calvin_ring_post(struct calvin_ring *r, struct txn *t, uint16_t nd, const void *b,
		      uint32_t len, struct fab_rpc_reply *rr)
{
	struct cc_node *n = r->n;
	if (!write_mode(n) || nd >= FAB_MAX_NODES || len > CALVIN_RING_SLOT_BYTES)
		return false;
	const int ci = sched_index(t->ccw->sched), w = t->ccw->worker_id;
	struct ring_worker *rw = ci >= 0 && ci < CALVIN_RING_SLOTS_PER_WORKER ? worker_state(r, w)
									     : NULL;
	if (!rw)
		return false;
	struct bell *bl = &rw->bell[ci][nd];
	const uint64_t fe = ck_pr_load_64(&n->flush_epoch);
	pthread_mutex_lock(&r->mu);
	if (bl->sent && bl->reply != bl->sent) /* invariant (4) */
		forget_locked(r, nd, bl->sent);
	bl->sent = 0;
	const struct peer_buf p = r->peer[nd];
	pthread_mutex_unlock(&r->mu);
	const uint32_t slot = (uint32_t)w * CALVIN_RING_SLOTS_PER_WORKER + (uint32_t)ci;
	if (!p.off || p.flush_epoch != fe || slot >= p.nslots || len > p.slot_bytes)
		return false;
	bl->req = (struct bell_req){ .token = p.token, .slot = slot, .len = len,
				     .sum = st_hash(b, len) };
	bl->reply = 0;
	bl->sent = p.token;
	fab_write(&t->batch, nd, p.off + (uint64_t)slot * p.slot_bytes, b, len);
	/* One-sided whatever cc-stages says of the stage, and never journaled:
	 * a request buffer means nothing after a crash. */
	struct fab_op *op = &t->batch.ops[t->batch.n - 1];
	op->flags = (uint8_t)((op->flags | FAB_OP_VOLATILE) & ~FAB_OP_TWOSIDED);
	rr->buf = &bl->reply;
	rr->cap = sizeof(bl->reply);
	fab_rpc(&t->batch, nd, CALVIN_RPC_RING_BELL, &bl->req, sizeof(bl->req), rr);
	ck_pr_inc_64(&r->st.acquire_writes);
	ck_pr_add_64(&r->st.acquire_write_bytes, len);
	return true;
}

void calvin_ring_note_rpc(struct calvin_ring *r, uint32_t len)
{
	ck_pr_inc_64(&r->st.acquire_rpcs);
	ck_pr_add_64(&r->st.acquire_rpc_bytes, len);
}

void calvin_ring_peer_gone(struct calvin_ring *r, uint16_t peer)
{
	if (!r || peer >= FAB_MAX_NODES)
		return;
	pthread_mutex_lock(&r->mu);
	forget_locked(r, peer, 0);
	r->peer[peer].retry_after = 0;
	pthread_mutex_unlock(&r->mu);
}

void calvin_ring_reset(struct calvin_ring *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < FAB_MAX_NODES; i++) {
		forget_locked(r, (uint16_t)i, 0);
		r->own[i] = (struct own_buf){ 0 };
	}
	pthread_mutex_unlock(&r->mu);
}

void calvin_ring_stats_get(struct calvin_ring *r, struct calvin_ring_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!r)
		return;
	const uint64_t *src = (const uint64_t *)&r->st;
	uint64_t *dst = (uint64_t *)out;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = ck_pr_load_64((uint64_t *)&src[i]);
}
