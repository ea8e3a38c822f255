/*
 * calvin.c: Calvin's sequencer and deterministic lock manager (calvin.h
 * has the design).
 *
 * A participant's state per epoch e (struct epoch, in a ring):
 *   OPEN      --an ACQUIRE, a RELEASE or a local part of e arrives: counted
 *   KNOWN     --DELIVER(e): how many parts each coordinator sends here
 *               (from e's initiator; or, if that one died before it
 *               reached this node, from a round that closes e again:
 *               close_round, which a stuck coordinator of e or of a
 *               later epoch runs, calvin_sequence)
 *   COMPLETE  every part arrived and e - 1 is processed
 *   PROCESSED --process(): the parts, sorted by (node, seq), queue their
 *               locks; the slot is free again
 * A part (one transaction's locks on this node):
 *   ARRIVED   --process()--> QUEUED --every lock granted--> GRANTED
 *             (the coordinator's coroutine is woken, or its ACQUIRE
 *             answered) --RELEASE--> freed, the queues behind it granted
 *   ARRIVED   --RELEASE before processing--> CANCELLED (skipped, freed by
 *               process())
 *
 * Invariants:
 *  (1) Every node queues the parts of epoch e only after every part of
 *      every epoch before e, and those of e in (node, seq) order: the
 *      queues of every key hold transactions in one global order, so a
 *      transaction waits only for earlier ones, and none deadlocks.
 *  (2) An epoch's labels are fixed once: a node closes each epoch number
 *      once (close_local), and the counts it answered for it are kept
 *      (hist), so concurrent initiators of one epoch deliver the same
 *      counts.
 *  (3) A coroutine is unparked only if it parked for calvin (mine.parked
 *      under the mutex), on its own worker's thread: no stray unpark
 *      reaches a later fabric wait.
 */
#include "cc/calvin.h"

#include <ck_pr.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc/calvin_ring.h"
#include "cc/cc.h"
#include "cc/exec_internal.h"
#include "cc/node.h"
#include "cc/sched.h"

#define RING 4096u          /* epochs a node keeps state for */
/* An initiator waits while its node has this many epochs closed and not
 * processed (a participant behind): the ring never wraps onto one. */
#define BEHIND_MAX (RING / 4)
#define QBUCKETS 65536u     /* lock table chains */
#define PBUCKETS 16384u     /* parts by id */
#define MAX_WORKERS 256

struct part;

/* A lock request in its key's queue. */
struct qent {
	struct part *p;
	uint64_t h;
	uint32_t koff;              /* its key in the part's kbuf (klen 0: none) */
	uint16_t klen;
	bool x, granted;
	struct qent *next;
};

struct queue {
	uint64_t h;
	struct qent *head, *tail;
	struct queue *next;
};

struct part {
	uint64_t e;
	uint16_t src;
	uint32_t seq;
	int nlocks;
	struct qent *ents;
	struct queue **spare;       /* a queue per lock, for keys that have none */
	int waiting;                /* locks not granted yet */
	uint32_t got;               /* locks received so far (ACQUIRE comes in chunks) */
	bool arrived;               /* counted in its epoch (every chunk, or cancelled) */
	bool cancelled, queued;
	int worker;                 /* a remote part: the worker whose notifier
				       tells its coordinator (src) of the grant */
	struct calvin_mine *mine;   /* a local part: the coordinator's transaction */
	/* Value forwarding (calvin.h): a remote part's keys and its
	 * transaction's owner word (0: nothing to forward); the lock words
	 * the notifier latched for it (block offsets), given back at its
	 * RELEASE before its locks are (forward_part, finish_release). */
	uint64_t owner;
	char *kbuf;
	uint32_t kused, kcap;
	uint64_t *latched;
	int nlatched;
	bool unsent;                /* a latched item its GRANT did not carry */
	bool delivered;             /* its GRANT reached the coordinator */
	bool forwarding;            /* its notifier is reading its items */
	bool releasing;             /* released; its notifier unlatches, then frees it */
	bool unlatch;               /* ... giving the latches back (else recovery does) */
	struct part *hnext;         /* by id */
	struct part *enext;         /* its epoch's */
};

struct epoch {
	uint64_t e;
	bool known;
	uint32_t need, arrived;     /* totals of the two below */
	uint32_t need_from[FAB_MAX_NODES], arrived_from[FAB_MAX_NODES];
	struct part *parts;
};

struct hist {
	uint64_t e;
	uint32_t cnt[FAB_MAX_NODES];
};

/* A grant to tell a remote coordinator of. */
struct grant {
	uint64_t e;
	uint32_t seq;
	uint16_t to;
	uint64_t since;             /* its first failed send (ns), 0: none yet */
	struct grant *next;
};

/* A RELEASE or DELIVER whose send failed while its target is alive (this
 * node's lease lapsed at a configuration change, the target had no
 * worker yet...): its worker's notifier sends it again (resend). */
struct outmsg {
	struct outmsg *next;
	uint64_t since;             /* its first failed send (ns) */
	uint16_t to, handler;
	uint32_t len;
	char data[];
};

/* A worker's mailbox: coroutines to wake and grants to send, handed to its
 * thread (fab_worker_post_call); its notifier coroutine sends the grants,
 * and the messages to send again. */
struct mbox {
	struct fab_rpc_call wake;   /* handed to the worker's inbox */
	bool posted;
	bool notifying;             /* its notifier coroutine runs */
	struct grant *grants, *grants_tail;
	struct outmsg *out, *out_tail; /* messages to send again */
	struct grant *unlatch;      /* parts (e, seq, src in .to) to finish releasing */
	struct calvin_mine *wakes;
};

struct calvin {
	struct cc_node *n;
	pthread_mutex_t mu;
	uint64_t closed;            /* the last epoch closed here */
	uint64_t processed;         /* the last epoch queued here */
	uint64_t open_since;        /* first submission of the open epoch (ns), 0: none */
	struct calvin_mine *open_head, *open_tail;
	struct hist *hist;
	struct epoch *ep;
	struct queue **qtab;
	struct part **ptab;
	struct calvin_mine **mtab;  /* this node's labeled transactions, by (e, seq) */
	uint64_t purged_through[FAB_MAX_NODES]; /* purge(): epochs of a node's dropped */
	/* A node's incarnations as this one saw them: calvin_peer_failed
	 * (its restart, or its takeover) counts one more, and notes the
	 * epoch closed then. A failure seen by a call sent to an earlier
	 * incarnation, or reported for an epoch closed before it (a DELIVER
	 * that was late), is that incarnation's: it purges nothing of the
	 * new one's (purge_seen). */
	uint32_t inc[FAB_MAX_NODES];
	uint64_t rejoined_at[FAB_MAX_NODES];
	struct mbox mbox[MAX_WORKERS];
	struct calvin_stats st;
	uint64_t digest;            /* of the queued order (calvin_order_digest) */
	struct calvin_ring *ring;   /* ACQUIRE's one-sided transport (calvin_ring.h) */
	bool stall_deliver;         /* testing: calvin_stall_deliver (under the mutex) */
};

/* The wire. */
struct close_req {
	uint64_t e;
};
struct close_rep {
	uint64_t closed_before;
	uint64_t processed;        /* the last epoch queued there, once e is closed */
	uint32_t cnt[FAB_MAX_NODES];
};
struct deliver_req {
	uint64_t e;
	uint64_t gone;             /* members that did not answer CLOSE(e) */
	uint32_t need[FAB_MAX_NODES];
};
/* A chunk of a part's locks: locks off .. off + count of nlocks. */
struct acquire_hdr {
	uint64_t e;
	uint32_t seq;
	uint32_t nlocks;
	uint32_t off, count; /* then count hashes (u64), count exclusive flags (u8),
				count key lengths (u16, 0: not sent), the keys */
	uint64_t owner;      /* the transaction's owner word (value forwarding) */
};
/* Bytes of one lock in an ACQUIRE, besides its key. */
#define ACQUIRE_LOCK_BYTES 11u
#define ACQUIRE_MAX_LOCKS ((FAB_RPC_MAX - sizeof(struct acquire_hdr)) / ACQUIRE_LOCK_BYTES)
/* Keys longer than this are not sent: their values are not forwarded. */
#define FWD_KEY_MAX 1024u

struct release_req {
	uint64_t e;
	uint32_t seq;
	uint32_t flags;
};
/* RELEASE: the transaction's outcome on this node is known, so the
 * latches the participant forwarded and the transaction did not release
 * are given back (else recovery settles them); with RELEASE_ADOPTED, the
 * transaction took (and so released) every latched item it was sent,
 * and only latches the GRANT did not carry remain. */
#define RELEASE_UNLATCH 1u
#define RELEASE_ADOPTED 2u
/* GRANT: a run of these, the parts granted (the sender is the node), each
 * followed by len bytes of forwarded items (struct calvin_fwd, image). */
struct grant_msg {
	uint64_t e;
	uint32_t seq;
	uint32_t len;
};

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* ---- mailboxes: hand a grant or a label to a worker's thread ---- */

/* The fabric answers a call left in an inbox at shutdown: nothing to do. */
static void mbox_done(struct fab_rpc_call *c, int32_t status, uint32_t len)
{
	(void)c;
	(void)status;
	(void)len;
}

static void mbox_post(struct calvin *cv, int w)
{
	struct mbox *mb = &cv->mbox[w];
	if (mb->posted)
		return;
	struct cc_worker *ccw = ck_pr_load_ptr(&cv->n->workers[w]);
	if (!ccw)
		return;
	mb->posted = true;
	memset(&mb->wake, 0, sizeof(mb->wake));
	mb->wake.handler = CALVIN_RPC_WAKE;
	mb->wake.done = mbox_done;
	fab_worker_post_call(ccw->fw, &mb->wake);
}

/* Under the mutex: wake m's coroutine if it waits for calvin. */
static void wake_mine(struct calvin *cv, struct calvin_mine *m)
{
	if (!m->parked || m->in_mbox)
		return;
	struct mbox *mb = &cv->mbox[m->worker];
	m->in_mbox = true;
	m->wnext = mb->wakes;
	mb->wakes = m;
	mbox_post(cv, m->worker);
}

/* Under the mutex, by m's coroutine once its wait ended (a timed one may
 * end while a wake is on its way): m leaves its mailbox, so nothing names
 * it after the coroutine moved on (invariant (3)). */
static void mbox_unlink(struct calvin *cv, struct calvin_mine *m)
{
	if (!m->in_mbox)
		return;
	struct calvin_mine **pp = &cv->mbox[m->worker].wakes;
	while (*pp && *pp != m)
		pp = &(*pp)->wnext;
	if (*pp)
		*pp = m->wnext;
	m->in_mbox = false;
}

static void notifier(struct sched *s, void *arg);
static void purge(struct calvin *cv, uint16_t node);
static void purge_seen(struct calvin *cv, uint16_t node, uint32_t inc, uint64_t e);
static void incarnations(struct calvin *cv, uint32_t inc[FAB_MAX_NODES]);
static struct part **part_slot(struct calvin *cv, uint64_t e, uint16_t src, uint32_t seq);
static void part_unqueue(struct calvin *cv, struct part *p);
static void part_free(struct part *p);
static void spares_free(struct part *p);
static bool unlatch_later(struct calvin *cv, struct part *p);

/* Has this node's lease run out (fab_set_lease: the fabric then refuses
 * every operation on another node)? A node adopting a configuration is
 * in that state until the leader grants the lease again. */
static bool lease_lapsed(const struct calvin *cv)
{
	const uint64_t lease = ck_pr_load_64(&cv->n->lease_until_ns);
	return lease && sched_now_ns() >= lease;
}

/* How long a message goes on being sent again: beyond a configuration
 * change's lapse of the lease (its quiesce waits out transactions of up
 * to txn-timeout, then the takeover). */
static uint64_t resend_ns(const struct cc_node *n)
{
	return 2 * ck_pr_load_64(&n->limits.txn_timeout_ms) * 1000000ull + 2000000000ull;
}

/*
 * A GRANT, RELEASE or DELIVER to `to` failed with status: is it to be sent
 * again? Not to a node that is gone: out of the configuration (fenced),
 * whose takeover drops here what it held, or dead (a connection failure
 * while this node's lease holds; the caller purges it). Every other
 * failure is this node's or passing (its lease lapsed at a configuration
 * change, the target has no worker yet), and the message is all that
 * ends what the target waits for: a coordinator for its grant, a
 * participant's queue for its release, an epoch for its counts. Sending
 * one twice is harmless (h_grant, release_part and deliver_local are
 * idempotent). `since`: its first failure, 0 for this one.
 */
static bool resend(struct calvin *cv, uint16_t to, int status, uint64_t since)
{
	if (status >= 0 || fab_fenced(cv->n->fab, to))
		return false;
	if (status == -EHOSTDOWN && !lease_lapsed(cv))
		return false;
	if (since && sched_now_ns() - since > resend_ns(cv->n)) {
		cc_log(cv->n, CC_LOG_WARNING, "calvin: a message to node %u still fails (%d) after "
		       "%" PRIu64 " ms: dropped", to, status,
		       (sched_now_ns() - since) / 1000000);
		return false;
	}
	return true;
}

/* Under the mutex: a RELEASE or DELIVER for worker w's notifier to send
 * again (resend). */
static void out_later(struct calvin *cv, int w, uint16_t to, uint16_t handler, const void *data,
		      uint32_t len, uint64_t since)
{
	struct outmsg *o = malloc(sizeof(*o) + len);
	if (!o) {
		cc_log(cv->n, CC_LOG_WARNING, "calvin: out of memory for a message to node %u", to);
		return;
	}
	*o = (struct outmsg){ .since = since ? since : sched_now_ns(), .to = to,
			      .handler = handler, .len = len };
	memcpy(o->data, data, len);
	struct mbox *mb = &cv->mbox[w];
	if (mb->out_tail)
		mb->out_tail->next = o;
	else
		mb->out = o;
	mb->out_tail = o;
	if (!mb->notifying)
		mbox_post(cv, w);
}

/* Under the mutex: node is gone, nothing queued for it is sent. */
static void drop_pending(struct calvin *cv, uint16_t node)
{
	for (int w = 0; w < MAX_WORKERS; w++) {
		struct mbox *mb = &cv->mbox[w];
		struct grant **gp = &mb->grants, *last = NULL;
		while (*gp) {
			struct grant *g = *gp;
			if (g->to == node) {
				*gp = g->next;
				free(g);
			} else {
				last = g;
				gp = &g->next;
			}
		}
		mb->grants_tail = last;
		struct outmsg **op = &mb->out, *olast = NULL;
		while (*op) {
			struct outmsg *o = *op;
			if (o->to == node) {
				*op = o->next;
				free(o);
			} else {
				olast = o;
				op = &o->next;
			}
		}
		mb->out_tail = olast;
	}
}

static struct calvin_mine **mine_slot(struct calvin *cv, uint64_t e, uint32_t seq)
{
	struct calvin_mine **b = &cv->mtab[mix(e * 0x9e3779b97f4a7c15ull ^ seq) & (PBUCKETS - 1)];
	while (*b && !((*b)->epoch == e && (*b)->seq == seq))
		b = &(*b)->hnext;
	return b;
}

/* A remote coordinator's part is granted: its worker's notifier says so. */
static void grant_later(struct calvin *cv, const struct part *p)
{
	struct grant *g = malloc(sizeof(*g));
	if (!g) {
		cc_log(cv->n, CC_LOG_WARNING, "calvin: out of memory for a grant");
		return;
	}
	*g = (struct grant){ .e = p->e, .seq = p->seq, .to = p->src };
	struct mbox *mb = &cv->mbox[p->worker];
	if (mb->grants_tail)
		mb->grants_tail->next = g;
	else
		mb->grants = g;
	mb->grants_tail = g;
	if (!mb->notifying)
		mbox_post(cv, p->worker);
}

static int h_wake(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)len;
	struct calvin *cv = arg;
	struct mbox *mb = (struct mbox *)((char *)c - offsetof(struct mbox, wake));
	int w = (int)(mb - cv->mbox);
	struct cc_worker *ccw = cv->n->workers[w];
	pthread_mutex_lock(&cv->mu);
	/* Unparked under the mutex: every coroutine on the list is parked
	 * (it unlinks itself under the mutex before it moves on), and runs
	 * on this thread, so none can be between the two. */
	for (struct calvin_mine *m = mb->wakes; m; m = m->wnext) {
		m->in_mbox = false;
		sched_unpark(ccw->sched, m->handle);
	}
	mb->wakes = NULL;
	mb->posted = false;
	if ((mb->grants || mb->out || mb->unlatch) && !mb->notifying) {
		/* The reserved coroutine (sched_reserve) when every other one
		 * waits for a grant; without a reserve, a free one, else the
		 * mailbox tries again at the next poll. */
		if (sched_spawn_reserved(ccw->sched, notifier, ccw) == 0)
			mb->notifying = true;
		else
			mbox_post(cv, w);
	}
	pthread_mutex_unlock(&cv->mu);
	return FAB_RPC_DEFER; /* a mailbox, not a call: nothing to answer */
}

/* Give back latches (block offsets on this node) taken for owner. */
static void unlatch_all(struct fab_batch *b, uint16_t self, uint64_t owner, const uint64_t *offs,
			int n)
{
	uint64_t old[32];
	for (int i = 0; i < n;) {
		int k = 0;
		for (; i < n && k < 32; i++, k++) {
			fab_cas(b, self, offs[i] + (uint64_t)W_LOCK * 8u, owner, 0, &old[k]);
			b->ops[b->n - 1].flags |= FAB_OP_VOLATILE;
		}
		(void)fab_exec(b); /* this node's own memory */
	}
}

/*
 * finish_release - a part released while it held latches it forwarded
 * (release_part): they are given back, then its locks. On its worker's
 * notifier, with the mutex not held.
 */
static void finish_release(struct calvin *cv, struct fab_batch *b, uint64_t e, uint16_t src,
			   uint32_t seq)
{
	const uint16_t self = fab_self(cv->n->fab);
	pthread_mutex_lock(&cv->mu);
	struct part *p = *part_slot(cv, e, src, seq);
	if (!p || !p->releasing || p->forwarding) {
		pthread_mutex_unlock(&cv->mu); /* gone (a reset), or forward_part's */
		return;
	}
	uint64_t *offs = p->unlatch ? p->latched : NULL;
	const int n = p->unlatch ? p->nlatched : 0;
	const uint64_t owner = p->owner;
	p->latched = NULL;
	p->nlatched = 0;
	pthread_mutex_unlock(&cv->mu);
	unlatch_all(b, self, owner, offs, n);
	free(offs);
	pthread_mutex_lock(&cv->mu);
	struct part **pp = part_slot(cv, e, src, seq);
	if ((p = *pp) != NULL && p->releasing) {
		*pp = p->hnext;
		if (p->queued)
			part_unqueue(cv, p);
		part_free(p);
	}
	pthread_mutex_unlock(&cv->mu);
}

/* Does the block image (read behind our latch) still hold key, in the
 * generation the index gave (prim_check_block's test, for forwarding)? */
static bool still_ours(const void *img, const struct st_ref *ref, const char *key, uint32_t klen)
{
	struct st_item it;
	memcpy(&it, img, sizeof(it));
	return st_ident_gen(it.ident) == ref->gen && st_ident_klen(it.ident) == klen &&
	       !(st_data_flags(it.data) & ST_F_DEAD) &&
	       memcmp((const char *)img + sizeof(it), key, klen) == 0;
}

/* A copy of a part's keys, for forward_part to read without the mutex. */
struct fwd_keys {
	int n;
	uint64_t owner;
	struct qent *ents;
	char *kbuf;
};

/*
 * forward_part - value forwarding (calvin.h) for the granted part
 * (e, src, seq): its items on this node, resolved through the index (an
 * absent key gets its placeholder, as the coordinator's read would have
 * made it), the exclusive ones latched for its transaction and read
 * behind the latch, appended to out as struct calvin_fwd + image while
 * they fit in room. Returns the bytes appended. On the notifier, with the
 * mutex not held; the part's locks are held throughout (it is not
 * released before forwarding ends: release_part).
 */
static uint32_t forward_part(struct calvin *cv, struct cc_worker *ccw, struct fab_batch *b,
			     uint64_t e, uint16_t src, uint32_t seq, char *out, uint32_t room)
{
	struct cc_node *n = cv->n;
	const uint16_t self = fab_self(n->fab);
	struct fwd_keys fk = { 0 };
	pthread_mutex_lock(&cv->mu);
	struct part *p = *part_slot(cv, e, src, seq);
	if (p && p->queued && !p->releasing && !p->forwarding && !p->nlatched && p->owner &&
	    p->kused && p->nlocks > 0) {
		fk.ents = malloc((size_t)p->nlocks * sizeof(*fk.ents));
		fk.kbuf = malloc(p->kused);
		if (fk.ents && fk.kbuf) {
			fk.n = p->nlocks;
			fk.owner = p->owner;
			memcpy(fk.ents, p->ents, (size_t)p->nlocks * sizeof(*fk.ents));
			memcpy(fk.kbuf, p->kbuf, p->kused);
			p->forwarding = true;
		}
	}
	pthread_mutex_unlock(&cv->mu);
	if (!fk.n) {
		free(fk.ents);
		free(fk.kbuf);
		return 0;
	}
	uint64_t *latched = malloc((size_t)fk.n * sizeof(*latched));
	struct st_item *buf = cc_scratch_get(ccw);
	int nl = 0;
	bool unsent = false;
	uint32_t used = 0, items = 0;
	for (int i = 0; latched && buf && i < fk.n; i++) {
		const struct qent *q = &fk.ents[i];
		if (!q->klen || room - used < sizeof(struct calvin_fwd) + sizeof(struct st_item) +
						  q->klen)
			continue;
		struct st_ref ref;
		if (st_create(b, st_region_coord(n->region), fk.owner, self, fk.kbuf + q->koff,
			      q->klen, q->h, &ref, buf) != 0)
			continue; /* no room for a placeholder: the coordinator decides */
		const uint32_t len = (uint32_t)sizeof(struct st_item) + q->klen +
				     st_data_vlen(buf->data);
		const uint32_t padded = CALVIN_FWD_PAD(len); /* the next one aligned */
		if (len > st_class_size(ref.cls) || room - used < sizeof(struct calvin_fwd) + padded)
			continue;
		char *img = out + used + sizeof(struct calvin_fwd);
		if (q->x) {
			uint64_t old = ~0ull;
			fab_cas(b, self, ref.off + (uint64_t)W_LOCK * 8u, 0, fk.owner, &old);
			b->ops[b->n - 1].flags |= FAB_OP_VOLATILE;
			fab_read(b, self, ref.off, img, len); /* behind the latch */
			if (fab_exec(b) != 0 || old != 0)
				continue; /* latched by a cleanup: the coordinator waits it out */
			if (!still_ours(img, &ref, fk.kbuf + q->koff, q->klen)) {
				/* Reaped, or the block reused, between the index
				 * lookup and the latch: not the key's to hold. */
				unlatch_all(b, self, fk.owner, &ref.off, 1);
				continue;
			}
			latched[nl++] = ref.off;
			const struct st_item *it = (const struct st_item *)img;
			if (sizeof(*it) + q->klen + st_data_vlen(it->data) != len) {
				unsent = true; /* changed meanwhile: the coordinator reads it */
				continue;
			}
		} else {
			if (buf->lock != 0)
				continue; /* an install under way: the coordinator waits it out */
			memcpy(img, buf, len);
		}
		const struct calvin_fwd f = { .idx = (uint32_t)i, .len = len, .off = ref.off,
					      .gen = ref.gen, .cls = ref.cls, .latched = q->x };
		memcpy(out + used, &f, sizeof(f));
		used += (uint32_t)sizeof(f) + padded;
		items++;
	}
	if (buf)
		cc_scratch_put(ccw, buf);
	free(fk.ents);
	free(fk.kbuf);
	pthread_mutex_lock(&cv->mu);
	p = *part_slot(cv, e, src, seq);
	const bool mine = p && p->forwarding; /* else reset meanwhile */
	const bool finish = mine && p->releasing;
	if (mine) {
		p->forwarding = false;
		p->latched = latched;
		p->nlatched = nl;
		p->unsent = unsent;
		if (p->releasing) {
			/* Released (or its coordinator purged) meanwhile: no
			 * transaction saw these latches. */
			p->unlatch = true;
			used = 0;
		} else {
			latched = NULL;
			cv->st.values_forwarded += items;
		}
	}
	pthread_mutex_unlock(&cv->mu);
	if (!mine) {
		unlatch_all(b, self, fk.owner, latched, nl);
		free(latched);
		return 0;
	}
	if (finish) /* the part keeps its latches: finish_release gives them back */
		finish_release(cv, b, e, src, seq);
	return used;
}

/* The parts a GRANT message to `to` named reached their coordinator: the
 * latches they forwarded are its (purge leaves them to recovery). */
static void mark_delivered(struct calvin *cv, uint16_t to, const char *msg, uint32_t len)
{
	pthread_mutex_lock(&cv->mu);
	for (uint32_t off = 0; off < len;) {
		struct grant_msg gm;
		memcpy(&gm, msg + off, sizeof(gm));
		off += (uint32_t)sizeof(gm) + gm.len;
		struct part *p = *part_slot(cv, gm.e, to, gm.seq);
		if (p)
			p->delivered = true;
	}
	pthread_mutex_unlock(&cv->mu);
}

/*
 * A worker's notifier: finishes the releases of its mailbox that wait for
 * latches to be given back, and sends its grants to their coordinators
 * (GRANT, one message per node, with the forwarded values), until none is
 * left. A grant goes by a call of its own, never as the reply to the
 * ACQUIRE, because a reply held back would hold back every later reply on
 * its connection (tcp answers a connection's requests in order), among
 * them the ones the transaction before it needs to finish. A message that
 * failed while its target lives (resend) goes again, after a pause that
 * grows to 10 ms, without values (the coordinator reads those itself);
 * the notifier runs until nothing is left to send.
 */
static void notifier(struct sched *s, void *arg)
{
	struct cc_worker *ccw = arg;
	struct calvin *cv = ccw->node->calvin;
	struct mbox *mb = &cv->mbox[ccw->worker_id];
	struct fab_stats fst = { 0 };
	struct fab_batch b;
	cc_batch_init(&b, ccw, &fst);
	uint64_t backoff = 0;
	for (;;) {
		pthread_mutex_lock(&cv->mu);
		struct grant *g = mb->grants;
		struct outmsg *out = mb->out;
		struct grant *ul = mb->unlatch;
		mb->grants = mb->grants_tail = mb->unlatch = NULL;
		mb->out = mb->out_tail = NULL;
		if (!g && !out && !ul)
			mb->notifying = false;
		pthread_mutex_unlock(&cv->mu);
		if (!g && !out && !ul)
			return;
		while (ul) {
			struct grant *next = ul->next;
			finish_release(cv, &b, ul->e, ul->to, ul->seq);
			free(ul);
			ul = next;
		}
		bool again = false; /* something failed, to be sent again */
		/* Per coordinator node, a GRANT message: (e, seq, len) and
		 * len bytes of forwarded values, per part. */
		char *msg[FAB_MAX_NODES] = { 0 };
		uint32_t mlen[FAB_MAX_NODES] = { 0 };
		uint64_t since[FAB_MAX_NODES] = { 0 }; /* the oldest first failure */
		struct fab_rpc_reply rr[FAB_MAX_NODES];
		struct grant *left = NULL, *left_tail = NULL; /* for the next round */
		while (g) {
			struct grant *next = g->next;
			uint16_t to = g->to;
			struct grant_msg gm = { .e = g->e, .seq = g->seq };
			if (!msg[to])
				msg[to] = malloc(FAB_RPC_MAX);
			if (msg[to] && FAB_RPC_MAX - mlen[to] >= sizeof(gm)) {
				const uint32_t at = mlen[to];
				mlen[to] += (uint32_t)sizeof(gm);
				if (!g->since) /* a first send */
					gm.len = forward_part(cv, ccw, &b, g->e, to, g->seq,
							      msg[to] + mlen[to],
							      FAB_RPC_MAX - mlen[to]);
				memcpy(msg[to] + at, &gm, sizeof(gm));
				mlen[to] += gm.len;
				if (g->since && (!since[to] || g->since < since[to]))
					since[to] = g->since;
				free(g);
			} else { /* a full message (or no memory): next round */
				g->next = NULL;
				if (left_tail)
					left_tail->next = g;
				else
					left = g;
				left_tail = g;
			}
			g = next;
		}
		if (left) {
			pthread_mutex_lock(&cv->mu);
			left_tail->next = mb->grants;
			if (!mb->grants)
				mb->grants_tail = left_tail;
			mb->grants = left;
			pthread_mutex_unlock(&cv->mu);
		}
		bool any = false;
		uint32_t inc[FAB_MAX_NODES];
		incarnations(cv, inc);
		for (int nd = 0; nd < FAB_MAX_NODES; nd++)
			if (mlen[nd]) {
				rr[nd] = (struct fab_rpc_reply){ 0 };
				fab_rpc(&b, (uint16_t)nd, CALVIN_RPC_GRANT, msg[nd], mlen[nd], &rr[nd]);
				any = true;
			}
		if (any)
			(void)fab_exec(&b);
		for (int nd = 0; nd < FAB_MAX_NODES; nd++) {
			if (!mlen[nd]) {
				free(msg[nd]);
				continue;
			}
			if (rr[nd].status >= 0)
				mark_delivered(cv, (uint16_t)nd, msg[nd], mlen[nd]);
			if (rr[nd].status < 0) {
				pthread_mutex_lock(&cv->mu);
				if (resend(cv, (uint16_t)nd, rr[nd].status, since[nd])) {
					/* Its coordinator waits for it: the same
					 * grants, next round. */
					const uint64_t t0 = since[nd] ? since[nd] : sched_now_ns();
					for (uint32_t off = 0; off < mlen[nd];) {
						struct grant_msg gm;
						memcpy(&gm, msg[nd] + off, sizeof(gm));
						off += (uint32_t)sizeof(gm) + gm.len;
						struct grant *ng = malloc(sizeof(*ng));
						if (!ng) {
							cc_log(cv->n, CC_LOG_WARNING, "calvin: out of "
							       "memory for a grant: lost");
							break;
						}
						*ng = (struct grant){ .e = gm.e, .seq = gm.seq,
								      .to = (uint16_t)nd, .since = t0 };
						if (mb->grants_tail)
							mb->grants_tail->next = ng;
						else
							mb->grants = ng;
						mb->grants_tail = ng;
					}
					again = true;
				} else if (rr[nd].status == -EHOSTDOWN) {
					/* The coordinator died: it needs no grant,
					 * and what it holds here is released. */
					purge_seen(cv, (uint16_t)nd, inc[nd], 0);
				}
				pthread_mutex_unlock(&cv->mu);
			}
			free(msg[nd]);
		}
		/* RELEASEs and DELIVERs to send again, a batch at a time. */
		while (out) {
			enum { CHUNK = 32 };
			struct outmsg *o[CHUNK];
			struct fab_rpc_reply orr[CHUNK];
			int k = 0;
			incarnations(cv, inc);
			for (; out && k < CHUNK; k++) {
				o[k] = out;
				out = out->next;
				orr[k] = (struct fab_rpc_reply){ 0 };
				fab_rpc(&b, o[k]->to, o[k]->handler, o[k]->data, o[k]->len, &orr[k]);
			}
			(void)fab_exec(&b);
			pthread_mutex_lock(&cv->mu);
			for (int i = 0; i < k; i++) {
				if (orr[i].status < 0 && resend(cv, o[i]->to, orr[i].status, o[i]->since)) {
					o[i]->next = NULL;
					if (mb->out_tail)
						mb->out_tail->next = o[i];
					else
						mb->out = o[i];
					mb->out_tail = o[i];
					again = true;
					continue;
				}
				if (orr[i].status == -EHOSTDOWN)
					purge_seen(cv, o[i]->to, inc[o[i]->to], 0);
				free(o[i]);
			}
			pthread_mutex_unlock(&cv->mu);
		}
		if (again) { /* until the lease is back, say */
			backoff = backoff ? backoff * 2 : 1000000;
			if (backoff > 10000000)
				backoff = 10000000;
			sched_sleep(s, backoff);
		} else {
			backoff = 0;
		}
	}
}

/* ---- the lock table ---- */

/* The queue of key hash h; else, with `spare` (a queue allocated with its
 * part, so that queueing never fails: part_new), a new one made of it. */
static struct queue *queue_get(struct calvin *cv, uint64_t h, struct queue **spare)
{
	struct queue **b = &cv->qtab[mix(h) & (QBUCKETS - 1)];
	for (struct queue *q = *b; q; q = q->next)
		if (q->h == h)
			return q;
	if (!spare)
		return NULL;
	struct queue *q = *spare;
	*spare = NULL;
	*q = (struct queue){ .h = h, .next = *b };
	*b = q;
	return q;
}

static void queue_free_if_empty(struct calvin *cv, struct queue *q)
{
	if (q->head)
		return;
	struct queue **b = &cv->qtab[mix(q->h) & (QBUCKETS - 1)];
	while (*b != q)
		b = &(*b)->next;
	*b = q->next;
	free(q);
}

static void mine_granted(struct calvin *cv, struct calvin_mine *m, uint16_t node)
{
	m->granted |= 1ull << node;
	if (m->granted == m->nodes)
		wake_mine(cv, m);
}

static void part_granted(struct calvin *cv, struct part *p)
{
	if (p->mine)
		mine_granted(cv, p->mine, fab_self(cv->n->fab));
	else
		grant_later(cv, p);
}

static void grant(struct calvin *cv, struct qent *q)
{
	q->granted = true;
	if (--q->p->waiting == 0)
		part_granted(cv, q->p);
}

/* Grant what the head of q allows: the first exclusive request, or the
 * shared ones up to the first exclusive. */
static void queue_grant(struct calvin *cv, struct queue *q)
{
	struct qent *e = q->head;
	if (!e)
		return;
	if (e->x) {
		if (!e->granted)
			grant(cv, e);
		return;
	}
	for (; e && !e->x; e = e->next)
		if (!e->granted)
			grant(cv, e);
}

/* Queue p's locks (invariant (1)). Allocates nothing: a key with no
 * queue yet takes one of p's spares. */
static void part_queue(struct calvin *cv, struct part *p)
{
	p->queued = true;
	p->waiting = p->nlocks + 1; /* held until the loop is done */
	for (int i = 0; i < p->nlocks; i++) {
		struct qent *e = &p->ents[i];
		e->p = p;
		struct queue *q = queue_get(cv, e->h, &p->spare[i]);
		bool first = !q->head;
		e->next = NULL;
		if (q->tail)
			q->tail->next = e;
		else
			q->head = e;
		q->tail = e;
		if (first) {
			grant(cv, e);
		} else if (!e->x) {
			bool ok = true;
			for (struct qent *o = q->head; o != e; o = o->next)
				if (o->x) {
					ok = false;
					break;
				}
			if (ok)
				grant(cv, e);
		}
	}
	spares_free(p);
	if (p->waiting > 1)
		cv->st.lock_waits++;
	if (--p->waiting == 0)
		part_granted(cv, p);
	cv->st.txns_scheduled++;
	cv->digest = mix(cv->digest ^ (p->e * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)p->src << 48) ^
			 p->seq);
}

static void part_unqueue(struct calvin *cv, struct part *p)
{
	for (int i = 0; i < p->nlocks; i++) {
		struct qent *e = &p->ents[i];
		struct queue *q = queue_get(cv, e->h, NULL);
		if (!q)
			continue; /* left out (part_queue) */
		struct qent **pp = &q->head, *prev = NULL;
		while (*pp && *pp != e) {
			prev = *pp;
			pp = &(*pp)->next;
		}
		if (!*pp)
			continue;
		*pp = e->next;
		if (q->tail == e)
			q->tail = prev;
		if (!q->head) {
			queue_free_if_empty(cv, q);
			continue;
		}
		queue_grant(cv, q);
	}
}

/* ---- parts and epochs ---- */

static struct part **part_slot(struct calvin *cv, uint64_t e, uint16_t src, uint32_t seq)
{
	uint64_t k = mix(e ^ ((uint64_t)src << 32) ^ ((uint64_t)seq << 40) ^ seq);
	struct part **b = &cv->ptab[k & (PBUCKETS - 1)];
	while (*b && !((*b)->e == e && (*b)->src == src && (*b)->seq == seq))
		b = &(*b)->hnext;
	return b;
}

static struct epoch *epoch_get(struct calvin *cv, uint64_t e)
{
	struct epoch *ep = &cv->ep[e % RING];
	if (ep->e != e) {
		/* The slot's last epoch was processed (RING epochs ago). */
		ep->e = e;
		ep->known = false;
		ep->need = ep->arrived = 0;
		memset(ep->need_from, 0, sizeof(ep->need_from));
		memset(ep->arrived_from, 0, sizeof(ep->arrived_from));
		ep->parts = NULL;
	}
	return ep;
}

static struct part *part_new(struct calvin *cv, uint64_t e, uint16_t src, uint32_t seq,
			     int nlocks)
{
	struct part *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->ents = nlocks ? calloc((size_t)nlocks, sizeof(*p->ents)) : NULL;
	p->spare = nlocks ? calloc((size_t)nlocks, sizeof(*p->spare)) : NULL;
	bool ok = !nlocks || (p->ents && p->spare);
	for (int i = 0; ok && i < nlocks; i++)
		ok = (p->spare[i] = malloc(sizeof(struct queue))) != NULL;
	if (!ok) {
		p->nlocks = nlocks;
		part_free(p);
		return NULL;
	}
	p->e = e;
	p->src = src;
	p->seq = seq;
	p->nlocks = nlocks;
	struct part **b = part_slot(cv, e, src, seq);
	p->hnext = NULL;
	*b = p;
	return p;
}

/* p is whole (or cancelled): its epoch counts it. */
static void part_arrive(struct calvin *cv, struct part *p)
{
	if (p->arrived)
		return;
	p->arrived = true;
	struct epoch *ep = epoch_get(cv, p->e);
	ep->arrived++;
	ep->arrived_from[p->src]++;
	p->enext = ep->parts;
	ep->parts = p;
}

static void spares_free(struct part *p)
{
	for (int i = 0; p->spare && i < p->nlocks; i++)
		free(p->spare[i]);
	free(p->spare);
	p->spare = NULL;
}

static void part_free(struct part *p)
{
	spares_free(p);
	free(p->ents);
	free(p->kbuf);
	free(p->latched);
	free(p);
}

static void part_forget(struct calvin *cv, struct part *p)
{
	struct part **b = part_slot(cv, p->e, p->src, p->seq);
	if (*b == p)
		*b = p->hnext;
	part_free(p);
}

static int part_cmp(const void *a, const void *b)
{
	const struct part *x = *(struct part *const *)a, *y = *(struct part *const *)b;
	if (x->src != y->src)
		return x->src < y->src ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Queue every complete epoch, in order (invariant (1)). */
static void process(struct calvin *cv)
{
	for (;;) {
		uint64_t e = cv->processed + 1;
		struct epoch *ep = &cv->ep[e % RING];
		if (ep->e != e || !ep->known || ep->arrived < ep->need)
			return;
		bool all = true; /* from every coordinator: totals could hide one */
		for (int i = 0; i < FAB_MAX_NODES && all; i++)
			all = ep->arrived_from[i] >= ep->need_from[i];
		if (!all)
			return;
		uint32_t k = 0;
		for (struct part *p = ep->parts; p; p = p->enext)
			k++;
		struct part *one[64];
		struct part **v = k <= 64 ? one : malloc(k * sizeof(*v));
		if (!v) {
			cc_log(cv->n, CC_LOG_WARNING, "calvin: out of memory, epoch %" PRIu64 " waits",
			       e);
			return;
		}
		k = 0;
		for (struct part *p = ep->parts; p; p = p->enext)
			v[k++] = p;
		qsort(v, k, sizeof(*v), part_cmp);
		ep->parts = NULL;
		cv->processed = e;
		cv->st.epochs_processed++;
		for (uint32_t i = 0; i < k; i++) {
			if (v[i]->cancelled)
				part_forget(cv, v[i]);
			else
				part_queue(cv, v[i]);
		}
		if (k > 0 && cv->n->limits.calvin_trace) {
			char line[400];
			int off = snprintf(line, sizeof(line), "calvin: epoch %" PRIu64 " order", e);
			for (uint32_t i = 0; i < k && off < (int)sizeof(line) - 24; i++)
				off += snprintf(line + off, sizeof(line) - (size_t)off, " %u.%u",
						v[i]->src, v[i]->seq);
			cc_log(cv->n, CC_LOG_NOTICE, "%s", line);
		}
		if (v != one)
			free(v);
	}
}

/* Close the open epoch as e: label its transactions, count their parts
 * per node (cnt), queue the local parts' arrival. Under the mutex. */
static void close_local(struct calvin *cv, uint64_t e, uint32_t cnt[FAB_MAX_NODES])
{
	const uint16_t self = fab_self(cv->n->fab);
	memset(cnt, 0, FAB_MAX_NODES * sizeof(cnt[0]));
	uint32_t seq = 0;
	for (struct calvin_mine *m = cv->open_head; m;) {
		struct calvin_mine *next = m->next;
		m->next = NULL;
		m->epoch = e;
		m->seq = seq++;
		m->labeled = true;
		struct calvin_mine **slot = mine_slot(cv, e, m->seq);
		m->hnext = NULL;
		*slot = m;
		for (int nd = 0; nd < FAB_MAX_NODES; nd++)
			if (m->nodes & (1ull << nd))
				cnt[nd]++;
		if (m->nodes & (1ull << self)) {
			int nl = 0;
			for (int i = 0; i < m->nlocks; i++)
				nl += m->locks[i].node == self;
			struct part *p = part_new(cv, e, self, m->seq, nl);
			if (p) {
				p->mine = m;
				nl = 0;
				for (int i = 0; i < m->nlocks; i++)
					if (m->locks[i].node == self) {
						p->ents[nl].h = m->locks[i].h;
						p->ents[nl].x = m->locks[i].x;
						nl++;
					}
				part_arrive(cv, p);
			} else {
				/* It fails (never runs unlocked), and this node
				 * expects no part of it. */
				cc_log(cv->n, CC_LOG_WARNING, "calvin: out of memory for a part");
				cnt[self]--;
				m->failed = true;
			}
		}
		wake_mine(cv, m);
		m = next;
	}
	cv->st.txns_sequenced += seq;
	cv->open_head = cv->open_tail = NULL;
	cv->open_since = 0;
	cv->closed = e;
	cv->st.epoch = e;
	struct hist *h = &cv->hist[e % RING];
	h->e = e;
	memcpy(h->cnt, cnt, sizeof(h->cnt));
}

/* What this node answered for epoch e (zeros: it had nothing there). */
static void counts_of(struct calvin *cv, uint64_t e, uint32_t cnt[FAB_MAX_NODES])
{
	const struct hist *h = &cv->hist[e % RING];
	if (h->e == e)
		memcpy(cnt, h->cnt, sizeof(h->cnt));
	else
		memset(cnt, 0, FAB_MAX_NODES * sizeof(cnt[0]));
}

/* A node that missed epochs (it restarted, or was out of the
 * configuration) takes up the cluster's numbering at e: nothing of the
 * epochs it missed was meant for it. */
static void catch_up(struct calvin *cv, uint64_t e)
{
	if (cv->closed + 1 >= e)
		return;
	/* Skipping numbers is harmless: the epochs skipped hold nothing of
	 * ours (counts_of answers zeros for them). A CLOSE may overtake an
	 * earlier one on its way here, so the epochs before e may still
	 * come, and only a node that never saw one (it just started) skips
	 * processing them too. */
	const bool fresh = cv->closed == 0 && cv->processed == 0;
	cv->closed = e - 1;
	if (fresh)
		cv->processed = e - 1;
}

/* What epoch e waits for from src: what DELIVER said, unless src was
 * purged after it closed e (then only what arrived, all cancelled). */
static void epoch_need(struct calvin *cv, struct epoch *ep)
{
	uint32_t sum = 0;
	for (int i = 0; i < FAB_MAX_NODES; i++) {
		if (cv->purged_through[i] >= ep->e && ep->need_from[i] > ep->arrived_from[i])
			ep->need_from[i] = ep->arrived_from[i];
		sum += ep->need_from[i];
	}
	ep->need = sum;
}

/* `gone` did not answer CLOSE(e); inc: the incarnations the CLOSEs were
 * sent to, when this node sent them (else NULL). */
static void deliver_local(struct calvin *cv, uint64_t e, const uint32_t need[FAB_MAX_NODES],
			  uint64_t gone, const uint32_t *inc)
{
	for (int i = 0; i < FAB_MAX_NODES; i++)
		if ((gone & (1ull << i)) && i != fab_self(cv->n->fab))
			purge_seen(cv, (uint16_t)i, inc ? inc[i] : UINT32_MAX, e);
	if (e <= cv->processed)
		return;
	if (e - cv->processed >= RING) {
		cc_log(cv->n, CC_LOG_WARNING, "calvin: epoch %" PRIu64 " delivered while this node "
		       "is still at %" PRIu64 ": dropped", e, cv->processed + 1);
		return;
	}
	struct epoch *ep = epoch_get(cv, e);
	if (!ep->known) {
		ep->known = true;
		memcpy(ep->need_from, need, sizeof(ep->need_from));
	}
	epoch_need(cv, ep);
	process(cv);
}

/* The incarnations of every node, as this one counts them (for
 * purge_seen: taken before the calls whose failures it judges). */
static void incarnations(struct calvin *cv, uint32_t inc[FAB_MAX_NODES])
{
	pthread_mutex_lock(&cv->mu);
	memcpy(inc, cv->inc, sizeof(cv->inc));
	pthread_mutex_unlock(&cv->mu);
}

/*
 * A failure of `node` seen by a call sent to its incarnation `inc`
 * (UINT32_MAX: not known), or reported for epoch e (0: none): under the
 * mutex, purge it, unless it was an earlier incarnation's. Reports come
 * late (a DELIVER from another initiator, a resend's reply), and a node
 * back from a restart already sends ACQUIREs: purging then would drop its
 * new parts with the latches they forwarded, which nobody would give
 * back (its RELEASE finds no part).
 */
static void purge_seen(struct calvin *cv, uint16_t node, uint32_t inc, uint64_t e)
{
	if (inc != UINT32_MAX && inc != cv->inc[node])
		return;
	if (e && e <= cv->rejoined_at[node])
		return;
	purge(cv, node);
}

/*
 * A node failed (or restarted): no transaction it coordinated will
 * release its locks here, nor send the parts it counted, nor grant what
 * this node's transactions wait for. Under the mutex: its queued parts
 * are released, its others cancelled, the epochs it left open stop
 * waiting for it, and this node's transactions that wait for its grant
 * fail (their coordinator answers an error; nothing was written).
 */
static void purge(struct calvin *cv, uint16_t node)
{
	if (cv->purged_through[node] >= cv->closed && cv->purged_through[node] != 0)
		return; /* nothing new since the last purge */
	/* A node whose own lease lapsed sees every peer fail (fab_set_lease):
	 * they are not gone, it is. */
	if (lease_lapsed(cv))
		return;
	cv->purged_through[node] = cv->closed;
	unsigned dropped = 0, failed = 0;
	for (unsigned b = 0; b < PBUCKETS; b++) {
		struct part **pp = &cv->ptab[b];
		while (*pp) {
			struct part *p = *pp;
			if (p->src != node) {
				pp = &p->hnext;
				continue;
			}
			dropped++;
			if (p->releasing) {
				pp = &p->hnext; /* its notifier finishes it */
			} else if (p->forwarding) {
				/* Its notifier latches items for a transaction
				 * that will never see them: it gives them back. */
				p->releasing = true;
				pp = &p->hnext;
			} else if (p->queued && p->nlatched && !p->delivered &&
				   unlatch_later(cv, p)) {
				/* Latches no transaction saw (its GRANT never
				 * reached the dead node): given back, or they
				 * would hold the keys until the node is back. */
				p->releasing = true;
				p->unlatch = true;
				pp = &p->hnext;
			} else if (p->queued) {
				/* Latches it forwarded stay for recovery, which
				 * settles the dead node's commits (and releases
				 * every lock of its owner words). */
				*pp = p->hnext;
				part_unqueue(cv, p);
				part_free(p);
			} else {
				p->cancelled = true;
				part_arrive(cv, p);
				pp = &p->hnext;
			}
		}
		for (struct calvin_mine *m = cv->mtab[b]; m; m = m->hnext)
			if ((m->nodes & (1ull << node)) && !(m->granted & (1ull << node))) {
				failed += !m->failed; /* once in the log */
				m->failed = true;
				m->failed_nodes |= 1ull << node;
				wake_mine(cv, m);
			}
	}
	for (uint64_t e = cv->processed + 1; e <= cv->closed; e++) {
		struct epoch *ep = &cv->ep[e % RING];
		if (ep->e == e && ep->known)
			epoch_need(cv, ep);
	}
	drop_pending(cv, node); /* grants and releases it will not need */
	if (dropped || failed) {
		cv->st.purges++;
		cc_log(cv->n, CC_LOG_NOTICE,
		       "calvin: node %u failed or restarted: %u of its transactions' locks dropped "
		       "here, %u transactions of this node that wait for it fail", node, dropped,
		       failed);
	}
	process(cv);
}

/* Under the mutex: p's notifier gives back its latches, then releases it
 * (finish_release). */
static bool unlatch_later(struct calvin *cv, struct part *p)
{
	struct grant *g = malloc(sizeof(*g));
	if (!g) {
		cc_log(cv->n, CC_LOG_WARNING, "calvin: out of memory: a part's forwarded latches "
		       "stay held until its coordinator's node is settled");
		return false;
	}
	*g = (struct grant){ .e = p->e, .seq = p->seq, .to = p->src };
	struct mbox *mb = &cv->mbox[p->worker];
	g->next = mb->unlatch;
	mb->unlatch = g;
	if (!mb->notifying)
		mbox_post(cv, p->worker);
	return true;
}

/*
 * RELEASE of (e, src, seq): under the mutex. A part whose notifier still
 * reads its items, or that holds latches to give back (`unlatch`), is
 * released by the notifier once the latches are free: its locks are
 * given up after its latches, so the next transaction in a key's queue
 * (a retry of the same transaction, under the same owner word, among
 * them) never has a latch of its own taken back.
 */
static void release_part(struct calvin *cv, uint64_t e, uint16_t src, uint32_t seq,
			 uint32_t flags)
{
	bool unlatch = (flags & RELEASE_UNLATCH) != 0;
	struct part **b = part_slot(cv, e, src, seq);
	struct part *p = *b;
	if (!p) {
		/* Before its ACQUIRE (which then finds it cancelled), or after
		 * its epoch was processed without it. */
		if (e > cv->processed && (p = part_new(cv, e, src, seq, 0)) != NULL) {
			p->cancelled = true;
			cv->st.cancelled++;
			part_arrive(cv, p);
			process(cv);
		}
		return;
	}
	if (p->releasing)
		return; /* a RELEASE sent twice */
	if ((flags & RELEASE_ADOPTED) && !p->unsent)
		unlatch = false; /* the transaction released every one */
	if (p->queued && (p->forwarding || (unlatch && p->nlatched))) {
		p->releasing = true;
		p->unlatch = unlatch;
		if (p->forwarding || unlatch_later(cv, p))
			return;
		p->releasing = false; /* out of memory: released, latches held */
	}
	if (p->queued) {
		*b = p->hnext;
		part_unqueue(cv, p);
		part_free(p);
		return;
	}
	p->cancelled = true; /* process() drops it */
	cv->st.cancelled++;
	part_arrive(cv, p); /* its last chunks will not come */
	process(cv);
}

/* ---- RPC handlers (any worker's thread) ---- */

static int h_close(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	struct calvin *cv = arg;
	struct close_req rq;
	struct close_rep *rp = c->resp;
	if (c->len < sizeof(rq) || c->cap < sizeof(*rp))
		return -EINVAL;
	memcpy(&rq, c->req, sizeof(rq));
	pthread_mutex_lock(&cv->mu);
	rp->closed_before = cv->closed;
	if (cv->closed < rq.e) {
		catch_up(cv, rq.e);
		close_local(cv, rq.e, rp->cnt);
	} else {
		counts_of(cv, rq.e, rp->cnt);
	}
	rp->processed = cv->processed;
	pthread_mutex_unlock(&cv->mu);
	*len = sizeof(*rp);
	return 0;
}

static int h_deliver(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	struct calvin *cv = arg;
	struct deliver_req rq;
	if (c->len < sizeof(rq))
		return -EINVAL;
	memcpy(&rq, c->req, sizeof(rq));
	pthread_mutex_lock(&cv->mu);
	deliver_local(cv, rq.e, rq.need, rq.gone, NULL);
	pthread_mutex_unlock(&cv->mu);
	*len = 0;
	return 0;
}

/*
 * acquire_take - a chunk of a part's locks from coordinator `from` (the
 * ACQUIRE wire form, however it came), taken on worker `worker`: 0, or
 * the negative errno its coordinator sees (h_acquire).
 */
static int acquire_take(struct calvin *cv, uint16_t from, int worker, const void *req,
			uint32_t len)
{
	struct acquire_hdr hd;
	if (len < sizeof(hd))
		return -EINVAL;
	memcpy(&hd, req, sizeof(hd));
	if (hd.count > ACQUIRE_MAX_LOCKS || hd.off > hd.nlocks || hd.count > hd.nlocks - hd.off ||
	    hd.nlocks > INT32_MAX || len < sizeof(hd) + (size_t)hd.count * ACQUIRE_LOCK_BYTES)
		return -EINVAL;
	const char *hs = (const char *)req + sizeof(hd);
	const uint8_t *xs = (const uint8_t *)hs + (size_t)hd.count * 8;
	const char *kls = (const char *)xs + hd.count;
	const char *keys = kls + (size_t)hd.count * 2;
	size_t kbytes = 0;
	for (uint32_t i = 0; i < hd.count; i++) {
		uint16_t kl;
		memcpy(&kl, kls + (size_t)i * 2, 2);
		kbytes += kl;
	}
	if (len - sizeof(hd) - (size_t)hd.count * ACQUIRE_LOCK_BYTES < kbytes)
		return -EINVAL;
	pthread_mutex_lock(&cv->mu);
	if (hd.e <= cv->processed || hd.e <= cv->purged_through[from]) {
		/* Its epoch went by without it: its coordinator's counts did not
		 * reach the initiator (a failure), so it runs nowhere. */
		pthread_mutex_unlock(&cv->mu);
		return -ESTALE;
	}
	if (hd.e - cv->processed >= RING) { /* this node is that far behind */
		pthread_mutex_unlock(&cv->mu);
		return -EBUSY;
	}
	struct part *p = *part_slot(cv, hd.e, from, hd.seq);
	if (p && (p->cancelled || p->arrived || (uint32_t)p->nlocks != hd.nlocks)) {
		pthread_mutex_unlock(&cv->mu);
		return p->cancelled ? -ECANCELED : -EINVAL; /* released already, or a duplicate */
	}
	if (!p && !(p = part_new(cv, hd.e, from, hd.seq, (int)hd.nlocks))) {
		pthread_mutex_unlock(&cv->mu);
		return -ENOMEM;
	}
	if (kbytes && p->kcap - p->kused < kbytes) {
		size_t nc = p->kused + kbytes;
		char *nb = nc <= UINT32_MAX ? realloc(p->kbuf, nc) : NULL;
		if (nb) {
			p->kbuf = nb;
			p->kcap = (uint32_t)nc;
		} else {
			kbytes = 0; /* no forwarding for these: the coordinator fetches */
		}
	}
	p->owner = hd.owner;
	for (uint32_t i = 0; i < hd.count; i++) {
		struct qent *q = &p->ents[hd.off + i];
		uint16_t kl;
		memcpy(&q->h, hs + (size_t)i * 8, 8);
		q->x = xs[i] != 0;
		memcpy(&kl, kls + (size_t)i * 2, 2);
		q->klen = kbytes ? kl : 0;
		q->koff = p->kused;
		if (q->klen) {
			memcpy(p->kbuf + p->kused, keys, kl);
			p->kused += kl;
		}
		keys += kl;
	}
	p->got += hd.count;
	if (p->got >= p->nlocks) {
		p->worker = worker;
		part_arrive(cv, p);
		process(cv);
	}
	pthread_mutex_unlock(&cv->mu);
	return 0; /* queued: the grant comes by GRANT */
}

int calvin_acquire_take(struct cc_node *n, uint16_t from, int worker, const void *req,
			uint32_t len)
{
	return acquire_take(n->calvin, from, worker, req, len);
}

void calvin_acquire_stats(struct cc_node *n, struct calvin_ring_stats *out)
{
	calvin_ring_stats_get(n->calvin ? n->calvin->ring : NULL, out);
}

static int h_acquire(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	*len = 0;
	return acquire_take(arg, c->from, fab_worker_id(c->fw), c->req, c->len);
}

static int h_grant(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	struct calvin *cv = arg;
	*len = 0;
	const char *req = c->req;
	/* Whole, or not at all: a malformed message applies nothing. */
	for (uint32_t off = 0; off < c->len;) {
		struct grant_msg g;
		if (c->len - off < sizeof(g))
			return -EINVAL;
		memcpy(&g, req + off, sizeof(g));
		off += (uint32_t)sizeof(g);
		if (g.len > c->len - off)
			return -EINVAL;
		off += g.len;
	}
	pthread_mutex_lock(&cv->mu);
	for (uint32_t off = 0; off < c->len;) {
		struct grant_msg g;
		memcpy(&g, req + off, sizeof(g));
		off += (uint32_t)sizeof(g);
		const char *fwd = req + off;
		off += g.len;
		struct calvin_mine *m = *mine_slot(cv, g.e, g.seq);
		if (!m || (m->granted & (1ull << c->from)))
			continue; /* released already (a failure elsewhere), or a resend */
		if (g.len && (m->fwd[c->from] = malloc(g.len)) != NULL) {
			memcpy(m->fwd[c->from], fwd, g.len);
			m->fwdlen[c->from] = g.len;
		}
		mine_granted(cv, m, c->from);
	}
	pthread_mutex_unlock(&cv->mu);
	return 0;
}

static int h_release(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	struct calvin *cv = arg;
	struct release_req rq;
	*len = 0;
	if (c->len < sizeof(rq))
		return -EINVAL;
	memcpy(&rq, c->req, sizeof(rq));
	pthread_mutex_lock(&cv->mu);
	release_part(cv, rq.e, c->from, rq.seq, rq.flags);
	pthread_mutex_unlock(&cv->mu);
	return 0;
}

/* ---- node state ---- */

int calvin_create(struct cc_node *n)
{
	struct calvin *cv = calloc(1, sizeof(*cv));
	if (!cv)
		return -ENOMEM;
	cv->n = n;
	cv->hist = calloc(RING, sizeof(*cv->hist));
	cv->ep = calloc(RING, sizeof(*cv->ep));
	cv->qtab = calloc(QBUCKETS, sizeof(*cv->qtab));
	cv->ptab = calloc(PBUCKETS, sizeof(*cv->ptab));
	cv->mtab = calloc(PBUCKETS, sizeof(*cv->mtab));
	cv->ring = calvin_ring_create(n);
	if (!cv->hist || !cv->ep || !cv->qtab || !cv->ptab || !cv->mtab || !cv->ring) {
		calvin_ring_destroy(cv->ring);
		free(cv->mtab);
		free(cv->hist);
		free(cv->ep);
		free(cv->qtab);
		free(cv->ptab);
		free(cv);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < RING; i++)
		cv->ep[i].e = cv->hist[i].e = UINT64_MAX;
	pthread_mutex_init(&cv->mu, NULL);
	n->calvin = cv;
	return 0;
}

void calvin_destroy(struct cc_node *n)
{
	struct calvin *cv = n->calvin;
	if (!cv)
		return;
	for (unsigned i = 0; i < QBUCKETS; i++)
		for (struct queue *q = cv->qtab[i], *nx; q; q = nx) {
			nx = q->next;
			free(q);
		}
	for (unsigned i = 0; i < PBUCKETS; i++)
		for (struct part *p = cv->ptab[i], *nx; p; p = nx) {
			nx = p->hnext;
			part_free(p);
		}
	for (int w = 0; w < MAX_WORKERS; w++) {
		for (struct grant *g = cv->mbox[w].grants, *nx; g; g = nx) {
			nx = g->next;
			free(g);
		}
		for (struct outmsg *o = cv->mbox[w].out, *nx; o; o = nx) {
			nx = o->next;
			free(o);
		}
		for (struct grant *g = cv->mbox[w].unlatch, *nx; g; g = nx) {
			nx = g->next;
			free(g);
		}
	}
	pthread_mutex_destroy(&cv->mu);
	calvin_ring_destroy(cv->ring);
	free(cv->hist);
	free(cv->ep);
	free(cv->qtab);
	free(cv->ptab);
	free(cv->mtab);
	free(cv);
	n->calvin = NULL;
}

int calvin_attach(struct cc_node *n, char *err, size_t errlen)
{
	static const struct {
		uint16_t id;
		const char *name;
		fab_rpc_fn fn;
	} h[] = {
		{ CALVIN_RPC_CLOSE, "calvin-close", h_close },
		{ CALVIN_RPC_DELIVER, "calvin-deliver", h_deliver },
		{ CALVIN_RPC_ACQUIRE, "calvin-acquire", h_acquire },
		{ CALVIN_RPC_RELEASE, "calvin-release", h_release },
		{ CALVIN_RPC_GRANT, "calvin-grant", h_grant },
		{ CALVIN_RPC_WAKE, "calvin-wake", h_wake },
	};
	for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++)
		if (fab_rpc_register(n->fab, h[i].id, h[i].name, h[i].fn, n->calvin) != 0) {
			snprintf(err, errlen, "calvin: cannot register RPC handler %s", h[i].name);
			return -EINVAL;
		}
	return calvin_ring_attach(n->calvin->ring, err, errlen);
}

void calvin_peer_failed(struct cc_node *n, uint16_t peer)
{
	struct calvin *cv = n->calvin;
	if (!cv || peer >= FAB_MAX_NODES || peer == fab_self(n->fab))
		return;
	calvin_ring_peer_gone(cv->ring, peer); /* its buffer: asked for again */
	pthread_mutex_lock(&cv->mu);
	cv->inc[peer]++;
	cv->rejoined_at[peer] = cv->closed;
	drop_pending(cv, peer); /* (purge may find nothing new to drop) */
	purge(cv, peer);
	pthread_mutex_unlock(&cv->mu);
}

void calvin_reset(struct cc_node *n)
{
	struct calvin *cv = n->calvin;
	if (!cv)
		return;
	pthread_mutex_lock(&cv->mu);
	unsigned parts = 0, waiting = 0;
	for (unsigned b = 0; b < PBUCKETS; b++) {
		for (struct part *p = cv->ptab[b], *nx; p; p = nx) {
			nx = p->hnext;
			part_free(p);
			parts++;
		}
		cv->ptab[b] = NULL;
		for (struct calvin_mine *m = cv->mtab[b], *nx; m; m = nx) {
			/* (none: the quiesce let every transaction end) */
			nx = m->hnext;
			m->hnext = NULL;
			m->failed = true;
			wake_mine(cv, m);
			waiting++;
		}
		cv->mtab[b] = NULL;
	}
	for (unsigned i = 0; i < QBUCKETS; i++) {
		for (struct queue *q = cv->qtab[i], *nx; q; q = nx) {
			nx = q->next;
			free(q);
		}
		cv->qtab[i] = NULL;
	}
	for (int w = 0; w < MAX_WORKERS; w++) {
		struct mbox *mb = &cv->mbox[w];
		for (struct grant *g = mb->grants, *nx; g; g = nx) {
			nx = g->next;
			free(g);
		}
		for (struct outmsg *o = mb->out, *nx; o; o = nx) {
			nx = o->next;
			free(o);
		}
		for (struct grant *g = mb->unlatch, *nx; g; g = nx) {
			nx = g->next;
			free(g);
		}
		mb->grants = mb->grants_tail = mb->unlatch = NULL;
		mb->out = mb->out_tail = NULL;
	}
	for (unsigned i = 0; i < RING; i++) {
		cv->ep[i] = (struct epoch){ .e = UINT64_MAX };
		cv->hist[i].e = UINT64_MAX;
	}
	memset(cv->purged_through, 0, sizeof(cv->purged_through));
	cv->closed = cv->processed = 0; /* fresh: catch_up takes up the numbering */
	pthread_mutex_unlock(&cv->mu);
	calvin_ring_reset(cv->ring); /* the wipe freed its buffers */
	if (parts || waiting)
		cc_log(n, CC_LOG_NOTICE, "calvin: this node is out of the configuration: %u parts "
		       "dropped, %u transactions failed; it starts afresh at its rejoin", parts,
		       waiting);
}

void calvin_stats_get(struct cc_node *n, struct calvin_stats *out, uint64_t *digest)
{
	struct calvin *cv = n->calvin;
	memset(out, 0, sizeof(*out));
	*digest = 0;
	if (!cv)
		return;
	pthread_mutex_lock(&cv->mu);
	*out = cv->st;
	*digest = cv->digest;
	pthread_mutex_unlock(&cv->mu);
}

/* ---- the coordinator's side (on the transaction's coroutine) ---- */

void calvin_stall_deliver(struct cc_node *n)
{
	struct calvin *cv = n->calvin;
	pthread_mutex_lock(&cv->mu);
	cv->stall_deliver = true;
	pthread_mutex_unlock(&cv->mu);
}

/* Testing (calvin_stall_deliver): the DELIVER of e to `to` goes alone,
 * and the round waits, as an initiator would that hung between its
 * DELIVERs; then it sends the others. */
static void stall_round(struct calvin *cv, struct txn *t, uint64_t e, uint16_t to)
{
	(void)fab_exec(&t->batch);
	cc_log(cv->n, CC_LOG_WARNING, "calvin: testing: epoch %" PRIu64 " delivered to node %u "
	       "only; the round stalls for %u ms", e, to, CALVIN_STALL_MS);
	sched_sleep(t->ccw->sched, CALVIN_STALL_MS * 1000000ull);
}

/* The members of the configuration, ascending. */
static int members(struct txn *t, uint16_t *out)
{
	const struct pl_map *map = ck_pr_load_ptr(&t->node->place.cur);
	int k = map->nnodes;
	memcpy(out, map->nodes, (size_t)k * sizeof(out[0]));
	return k;
}

/*
 * The initiator's rounds (calvin.h, step 2): CLOSE(e) everywhere, then
 * DELIVER(e). With again != 0, epoch `again` is closed again (a waiting
 * transaction found it stuck: its initiator died between the rounds, or a
 * coordinator of it died before its ACQUIREs went out): every member
 * answers the counts it gave for it, and the DELIVER tells everyone which
 * members are gone. A member that does not answer CLOSE is gone: left out
 * of the epoch, and purged everywhere (purge), so nothing waits for it.
 *
 * Returns, for a round with again != 0, the oldest epoch before `again`
 * that a member answered it has closed and not queued yet (0: none). An
 * initiator that died between its DELIVERs (they go to each member in
 * turn) left such an epoch known to some members only; the others queue
 * nothing after it, and only a round for that very epoch ends their wait
 * (the caller's, calvin_sequence).
 */
static uint64_t close_round(struct calvin *cv, struct txn *t, uint64_t again)
{
	const uint16_t self = fab_self(t->node->fab);
	uint16_t mem[PL_MAX_NODES];
	int nm = members(t, mem);
	struct close_rep *rep = calloc((size_t)nm, sizeof(*rep));
	struct fab_rpc_reply *rr = calloc((size_t)nm, sizeof(*rr));
	struct deliver_req *dl = calloc((size_t)nm, sizeof(*dl));
	if (!rep || !rr || !dl) {
		free(rep);
		free(rr);
		free(dl);
		return 0;
	}
	uint32_t inc[FAB_MAX_NODES];
	uint64_t behind = 0;
	for (int tries = 0; tries < 3; tries++) {
		pthread_mutex_lock(&cv->mu);
		struct close_req rq = { .e = again ? again : cv->closed + 1 };
		memcpy(inc, cv->inc, sizeof(inc));
		bool open = cv->open_head != NULL;
		pthread_mutex_unlock(&cv->mu);
		if (!again && !open)
			break; /* another initiator closed ours */
		prim_stage(t, CC_STAGE_READ);
		int others = 0;
		for (int i = 0; i < nm; i++) {
			if (mem[i] == self)
				continue;
			rr[i] = (struct fab_rpc_reply){ .buf = &rep[i], .cap = sizeof(rep[i]) };
			fab_rpc(&t->batch, mem[i], CALVIN_RPC_CLOSE, &rq, sizeof(rq), &rr[i]);
			others++;
		}
		if (others)
			(void)fab_exec(&t->batch); /* each reply's status says */
		int stale = 0, ok = 0;
		uint64_t maxc = 0, gone = 0, mute = 0;
		for (int i = 0; i < nm; i++) {
			if (mem[i] == self)
				continue;
			if (rr[i].status < 0 || rr[i].len < sizeof(rep[i])) {
				/* Down: purged everywhere. Any other failure: its
				 * counts are unknown, so nothing waits for its parts
				 * (one that comes late is queued if its epoch is still
				 * open there, refused after: its transaction reruns). */
				mute |= 1ull << mem[i];
				if (rr[i].status == -EHOSTDOWN)
					gone |= 1ull << mem[i];
				continue;
			}
			ok++;
			if (again && rep[i].processed < again - 1 &&
			    (!behind || rep[i].processed + 1 < behind))
				behind = rep[i].processed + 1;
			if (rep[i].closed_before >= rq.e) {
				stale++;
				if (rep[i].closed_before > maxc)
					maxc = rep[i].closed_before;
			}
		}
		/* Every other member closed e long ago (this node restarted):
		 * take up the cluster's numbering and close the next one. */
		if (!again && ok > 0 && stale == ok && tries < 2) {
			pthread_mutex_lock(&cv->mu);
			catch_up(cv, maxc + 1);
			pthread_mutex_unlock(&cv->mu);
			continue;
		}
		uint32_t mine[FAB_MAX_NODES];
		pthread_mutex_lock(&cv->mu);
		if (cv->closed < rq.e)
			close_local(cv, rq.e, mine);
		else
			counts_of(cv, rq.e, mine);
		if (again)
			cv->st.reinitiated++;
		else
			cv->st.epochs_closed++;
		pthread_mutex_unlock(&cv->mu);
		/* The counts each member expects, by coordinator. */
		for (int j = 0; j < nm; j++) {
			dl[j].e = rq.e;
			dl[j].gone = gone;
			memset(dl[j].need, 0, sizeof(dl[j].need));
			for (int i = 0; i < nm; i++) {
				const uint32_t *cnt;
				if (mem[i] == self)
					cnt = mine;
				else if (!(mute & (1ull << mem[i])))
					cnt = rep[i].cnt;
				else
					continue;
				dl[j].need[mem[i]] = cnt[mem[j]];
			}
		}
		pthread_mutex_lock(&cv->mu);
		bool stall = !again && cv->stall_deliver;
		if (stall)
			cv->stall_deliver = false;
		pthread_mutex_unlock(&cv->mu);
		int self_j = -1;
		for (int j = 0; j < nm; j++) {
			if (mem[j] == self) {
				self_j = j;
				continue;
			}
			if (gone & (1ull << mem[j]))
				continue;
			rr[j] = (struct fab_rpc_reply){ 0 };
			fab_rpc(&t->batch, mem[j], CALVIN_RPC_DELIVER, &dl[j], sizeof(dl[j]), &rr[j]);
			if (stall) {
				stall_round(cv, t, rq.e, mem[j]);
				stall = false;
			}
		}
		(void)fab_exec(&t->batch);
		pthread_mutex_lock(&cv->mu);
		/* A member that closed e and missed its DELIVER could not
		 * process e, nor any epoch after it. */
		for (int j = 0; j < nm; j++)
			if (j != self_j && !(gone & (1ull << mem[j])) && rr[j].status < 0 &&
			    resend(cv, mem[j], rr[j].status, 0))
				out_later(cv, t->ccw->worker_id, mem[j], CALVIN_RPC_DELIVER, &dl[j],
					  sizeof(dl[j]), 0);
		if (self_j >= 0)
			deliver_local(cv, rq.e, dl[self_j].need, gone, inc);
		pthread_mutex_unlock(&cv->mu);
		break;
	}
	free(rep);
	free(rr);
	free(dl);
	return behind;
}

/* How long a labeled transaction waits for its grants before it suspects
 * a failure and closes its epoch again: grants behind long transactions
 * take a while, so this is generous. */
static uint64_t stuck_ns(const struct cc_node *n)
{
	return 4 * ck_pr_load_64(&n->limits.calvin_epoch_us) * 1000ull + 50ull * 1000 * 1000;
}

static bool labeled(const struct calvin_mine *m) { return m->labeled || m->failed; }

static bool is_labeled(struct calvin *cv, const struct calvin_mine *m)
{
	pthread_mutex_lock(&cv->mu);
	bool l = m->labeled;
	pthread_mutex_unlock(&cv->mu);
	return l;
}

/* Close the open epoch, once this node is not too far behind the ones it
 * closed (its ring of epochs, BEHIND_MAX). */
static void initiate(struct calvin *cv, struct txn *t, uint64_t limit)
{
	for (;;) {
		pthread_mutex_lock(&cv->mu);
		bool behind = cv->closed - cv->processed >= BEHIND_MAX;
		pthread_mutex_unlock(&cv->mu);
		if (!behind || sched_now_ns() >= limit)
			break;
		sched_sleep(t->ccw->sched, 1000000);
	}
	(void)close_round(cv, t, 0);
}
/* The bytes of lk's key an ACQUIRE carries: none past FWD_KEY_MAX (its
 * value is not forwarded). */
static uint32_t fwd_klen(const struct calvin_lock *lk)
{
	return lk->key && lk->klen <= FWD_KEY_MAX ? lk->klen : 0;
}

/* An ACQUIRE chunk (its wire form, len bytes at b) for node nd, posted on
 * t's batch; rr gets its status at the exec (acquire_take's result). */
static void acquire_post(struct txn *t, uint16_t nd, const void *b, uint32_t len,
			 struct fab_rpc_reply *rr)
{
	struct calvin_ring *ring = t->node->calvin->ring;
	if (calvin_ring_post(ring, t, nd, b, len, rr))
		return; /* calvin-acquire write: WRITE into its buffer, and a doorbell */
	calvin_ring_note_rpc(ring, len);
	fab_rpc(&t->batch, nd, CALVIN_RPC_ACQUIRE, b, len, rr);
}

static bool granted_all(const struct calvin_mine *m) { return m->granted == m->nodes || m->failed; }

/* Park until cond(m) holds (under the mutex; invariant (3)). With
 * timeout_ns, false once it passed (cond still false). */
static bool park_until(struct calvin *cv, struct txn *t, struct calvin_mine *m,
		       bool (*cond)(const struct calvin_mine *), uint64_t timeout_ns)
{
	const uint64_t end = timeout_ns ? sched_now_ns() + timeout_ns : 0;
	pthread_mutex_lock(&cv->mu);
	while (!cond(m)) {
		uint64_t now = sched_now_ns();
		if (end && now >= end) {
			mbox_unlink(cv, m);
			pthread_mutex_unlock(&cv->mu);
			return false;
		}
		m->parked = true;
		m->handle = sched_self(t->ccw->sched);
		pthread_mutex_unlock(&cv->mu);
		if (end)
			(void)sched_park_timeout(t->ccw->sched, end - now);
		else
			sched_park(t->ccw->sched);
		pthread_mutex_lock(&cv->mu);
		m->parked = false;
		mbox_unlink(cv, m);
	}
	pthread_mutex_unlock(&cv->mu);
	return true;
}

int calvin_sequence(struct txn *t, struct calvin_mine *m)
{
	struct cc_node *n = t->node;
	struct calvin *cv = n->calvin;
	const uint16_t self = fab_self(n->fab);
	m->worker = t->ccw->worker_id;
	m->next = NULL;

	/* 1. Submit. */
	uint64_t epoch_ns = ck_pr_load_64(&n->limits.calvin_epoch_us) * 1000ull;
	pthread_mutex_lock(&cv->mu);
	bool initiator = cv->open_since == 0;
	if (initiator)
		cv->open_since = sched_now_ns();
	const uint64_t due = cv->open_since + epoch_ns;
	if (cv->open_tail)
		cv->open_tail->next = m;
	else
		cv->open_head = m;
	cv->open_tail = m;
	pthread_mutex_unlock(&cv->mu);

	/* 2. Close: the initiator when the epoch is due, unless another
	 * node's CLOSE came first; the others wait for their label, and
	 * close the epoch themselves if its initiator's round failed. Every
	 * wait ends at txn-timeout (the abort hook then takes m out). */
	const uint64_t limit = sched_now_ns() +
			       ck_pr_load_64(&n->limits.txn_timeout_ms) * 1000000ull;
	if (initiator) {
		uint64_t now = sched_now_ns();
		if (now < due)
			(void)park_until(cv, t, m, labeled, due - now);
		if (!is_labeled(cv, m))
			initiate(cv, t, limit);
	}
	while (!park_until(cv, t, m, labeled, stuck_ns(n))) {
		if (sched_now_ns() >= limit)
			return CC_ETIMEOUT;
		initiate(cv, t, limit);
	}

	/* 3. Acquire: remote parts by RPC, all in flight together; a part
	 * bigger than a call goes in chunks, one per node per round (shm's
	 * rings take about 128 KiB of calls per node at once). */
	struct fab_rpc_reply rr[FAB_MAX_NODES];
	char *bufs[FAB_MAX_NODES] = { 0 };
	int first[FAB_MAX_NODES], count[FAB_MAX_NODES];
	uint32_t done[FAB_MAX_NODES] = { 0 };
	memset(count, 0, sizeof(count));
	for (int i = 0; i < m->nlocks; i++) {
		uint16_t nd = m->locks[i].node;
		if (nd == self)
			continue;
		if (!count[nd]++)
			first[nd] = i;
	}
	uint64_t failed = 0;
	int rc = CC_OK;
	uint32_t inc[FAB_MAX_NODES];
	incarnations(cv, inc);
	prim_stage(t, CC_STAGE_LOCK);
	calvin_ring_prepare(cv->ring, t, m->nodes & ~(1ull << self)); /* buffers not known yet */
	for (;;) {
		bool posted = false;
		for (int nd = 0; nd < FAB_MAX_NODES; nd++) {
			if (!count[nd] || done[nd] == (uint32_t)count[nd] || (failed & (1ull << nd)))
				continue;
			/* As many locks as a call holds, with their keys. */
			const struct calvin_lock *lk = &m->locks[first[nd] + (int)done[nd]];
			const uint32_t left = (uint32_t)count[nd] - done[nd];
			uint32_t k = 0;
			size_t len = sizeof(struct acquire_hdr);
			for (; k < left && k < ACQUIRE_MAX_LOCKS; k++) {
				size_t more = ACQUIRE_LOCK_BYTES + fwd_klen(&lk[k]);
				if (len + more > FAB_RPC_MAX)
					break;
				len += more;
			}
			struct acquire_hdr hd = { .e = m->epoch, .seq = m->seq,
						  .nlocks = (uint32_t)count[nd], .off = done[nd],
						  .count = k, .owner = t->owner };
			char *b = realloc(bufs[nd], len);
			if (!b) {
				rc = CC_EINTERNAL;
				break;
			}
			bufs[nd] = b;
			memcpy(b, &hd, sizeof(hd));
			char *kp = b + sizeof(hd) + (size_t)k * ACQUIRE_LOCK_BYTES;
			for (uint32_t x = 0; x < k; x++) {
				const uint16_t kl = (uint16_t)fwd_klen(&lk[x]);
				memcpy(b + sizeof(hd) + (size_t)x * 8, &lk[x].h, 8);
				b[sizeof(hd) + (size_t)k * 8 + x] = (char)lk[x].x;
				memcpy(b + sizeof(hd) + (size_t)k * 9 + (size_t)x * 2, &kl, 2);
				memcpy(kp, lk[x].key, kl);
				kp += kl;
			}
			done[nd] += k;
			rr[nd] = (struct fab_rpc_reply){ 0 };
			acquire_post(t, (uint16_t)nd, b, (uint32_t)len, &rr[nd]);
			m->sent |= 1ull << nd;
			posted = true;
		}
		if (!posted)
			break;
		(void)fab_exec(&t->batch);
		for (int nd = 0; nd < FAB_MAX_NODES; nd++)
			if (count[nd] && (m->sent & (1ull << nd)) && rr[nd].status < 0)
				failed |= 1ull << nd;
		if (rc != CC_OK)
			break;
	}
	for (int nd = 0; nd < FAB_MAX_NODES; nd++)
		free(bufs[nd]);
	if (failed) {
		/* A participant is gone: its queues went with it, and what the
		 * others hold for it must not wait for it (purge). One that
		 * answered that the epoch went by without this transaction (a
		 * failure excluded this node from it), or that it is too far
		 * behind to take it, holds nothing of it: the transaction runs
		 * again in a later epoch. */
		bool gone = false;
		pthread_mutex_lock(&cv->mu);
		for (int nd = 0; nd < FAB_MAX_NODES; nd++)
			if ((failed & (1ull << nd)) && rr[nd].status != -ESTALE &&
			    rr[nd].status != -EBUSY) {
				if (rr[nd].status == -EHOSTDOWN)
					purge_seen(cv, (uint16_t)nd, inc[nd], 0);
				gone = true;
			}
		pthread_mutex_unlock(&cv->mu);
		if (rc == CC_OK)
			rc = gone ? CC_EFAB : cc_abort_with(t, CC_CAUSE_OTHER);
	}
	if (rc == CC_EFAB)
		t->fatal = CC_EFAB;
	if (rc != CC_OK)
		return rc;

	/* Wait for every grant. A wait far beyond the epoch's length may be
	 * an epoch that cannot complete (its initiator or a coordinator died
	 * mid-way): close it again, which finds out and purges the dead. */
	while (!park_until(cv, t, m, granted_all, stuck_ns(n))) {
		if (sched_now_ns() >= limit)
			return CC_ETIMEOUT;
		/* A quiesce (a configuration to adopt, a switch) waits for this
		 * transaction, while the grants it waits for may wait for the
		 * quiesce: a participant adopting the configuration sends none
		 * until its new lease, which comes once every node adopted it.
		 * Nothing ran yet: the transaction goes again after it. */
		if (ck_pr_load_int(&n->quiesce))
			return cc_abort_with(t, CC_CAUSE_OTHER);
		/* Its own node behind: the oldest epoch it waits for; else
		 * its epoch, whose round finds a participant that is gone. */
		pthread_mutex_lock(&cv->mu);
		uint64_t e = cv->processed < m->epoch ? cv->processed + 1 : m->epoch;
		pthread_mutex_unlock(&cv->mu);
		/* A participant that waits for an older epoch (its DELIVER
		 * died with its initiator) grants nothing until that epoch
		 * is closed again too: no transaction of its own may wait
		 * there to do it. */
		if ((e = close_round(cv, t, e)) != 0)
			(void)close_round(cv, t, e);
	}
	if (m->failed) {
		/* A participant that failed after its ACQUIRE may have latched
		 * items for us before it died (value forwarding), in a region
		 * that outlives it (shm): the abort has its node release our
		 * owner word's locks there once it is back (t->unknown,
		 * undo_locks_pending). */
		t->unknown |= m->failed_nodes & m->sent;
		t->fatal = CC_EFAB;
		return CC_EFAB;
	}
	return CC_OK;
}

void calvin_note_adopted(struct txn *t, unsigned n)
{
	struct calvin *cv = t->node->calvin;
	if (!n)
		return;
	pthread_mutex_lock(&cv->mu);
	cv->st.values_adopted += n;
	pthread_mutex_unlock(&cv->mu);
}

void calvin_release(struct txn *t, struct calvin_mine *m)
{
	struct calvin *cv = t->node->calvin;
	const uint16_t self = fab_self(t->node->fab);
	pthread_mutex_lock(&cv->mu);
	if (!m->labeled) {
		/* Still in the open epoch (never happens: sequence returns
		 * labeled), taken out so nothing names it. */
		struct calvin_mine **pp = &cv->open_head, *prev = NULL;
		while (*pp && *pp != m) {
			prev = *pp;
			pp = &(*pp)->next;
		}
		if (*pp) {
			*pp = m->next;
			if (cv->open_tail == m)
				cv->open_tail = prev;
		}
		pthread_mutex_unlock(&cv->mu);
		return;
	}
	struct calvin_mine **slot = mine_slot(cv, m->epoch, m->seq);
	if (*slot == m)
		*slot = m->hnext;
	if (m->nodes & (1ull << self))
		release_part(cv, m->epoch, self, m->seq, 0);
	pthread_mutex_unlock(&cv->mu);
	for (int nd = 0; nd < FAB_MAX_NODES; nd++) { /* nothing writes them now */
		free(m->fwd[nd]);
		m->fwd[nd] = NULL;
	}
	/* Every participant counted a part of m, sent or not (an ACQUIRE
	 * that never went out must not hold its epoch up). */
	const uint64_t remote = m->nodes & ~(1ull << self);
	if (!remote)
		return;
	struct release_req rq[FAB_MAX_NODES];
	struct fab_rpc_reply rr[FAB_MAX_NODES];
	prim_stage(t, CC_STAGE_RELEASE);
	for (int nd = 0; nd < FAB_MAX_NODES; nd++)
		if (remote & (1ull << nd)) {
			rq[nd] = (struct release_req){ .e = m->epoch, .seq = m->seq };
			if (!(t->unknown & (1ull << nd)))
				rq[nd].flags = RELEASE_UNLATCH |
					       ((m->adopted & (1ull << nd)) ? RELEASE_ADOPTED : 0);
			rr[nd] = (struct fab_rpc_reply){ 0 };
			fab_rpc(&t->batch, (uint16_t)nd, CALVIN_RPC_RELEASE, &rq[nd], sizeof(rq[nd]),
				&rr[nd]);
		}
	(void)fab_exec(&t->batch);
	m->sent = 0;
	/* Its part there holds its locks (or its epoch) until a RELEASE
	 * comes: one that failed goes again, by the worker's notifier. */
	pthread_mutex_lock(&cv->mu);
	for (int nd = 0; nd < FAB_MAX_NODES; nd++)
		if ((remote & (1ull << nd)) && rr[nd].status < 0 &&
		    resend(cv, (uint16_t)nd, rr[nd].status, 0))
			out_later(cv, t->ccw->worker_id, (uint16_t)nd, CALVIN_RPC_RELEASE, &rq[nd],
				  sizeof(rq[nd]), 0);
	pthread_mutex_unlock(&cv->mu);
}
