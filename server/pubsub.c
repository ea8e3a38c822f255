/*
 * pubsub.c: Pub/Sub on one node.
 *
 * A subscriber belongs to one worker, and a publisher may run on any
 * worker (or on a fabric RPC handler, for a message from another node:
 * cmd_pubsub.c). Nothing here makes one thread wait for another:
 *
 *  - The node's registry (struct ps_node) says, for each channel, pattern
 *    and shard channel, how many subscribers each worker has. Subscribing
 *    takes its write lock; PUBLISH takes its read lock to count the
 *    receivers (its reply) and to find the workers to send to. Neither is
 *    on the path of any other command.
 *  - Each worker has an inbox (struct ps_worker): a lock-free stack that
 *    any thread pushes message envelopes onto with a CAS, and that the
 *    owner takes whole with one swap and reverses, so it delivers in push
 *    order. A push onto an empty inbox wakes the worker through its
 *    eventfd (worker_wake), the wake that new connections use.
 *  - The owner delivers to its local subscribers (its own maps of channel
 *    and pattern to clients), appending to their reply buffers; a client
 *    whose coroutine is running a command gets the message in a side
 *    buffer that its coroutine appends after that command (never inside a
 *    reply that a CC abort may cut back).
 *
 * Invariants:
 *  (1) Order: one publisher's messages reach a worker's inbox in the order
 *      of its ps_publish_local calls (each push completes before the call
 *      returns) and the owner delivers each inbox in push order, so every
 *      subscriber sees one publisher's messages on a channel in order.
 *  (2) A message is one allocation with one envelope per target worker
 *      and a reference count of its envelopes (ck_pr); the worker that
 *      drops the last one frees it.
 *  (3) The registry and the workers' local maps agree up to in-flight
 *      changes: the owner updates its local map and then the registry in
 *      one call (ps_subscribe), so a PUBLISH may count a subscriber that
 *      leaves before delivery, or miss one that joins during it, as a
 *      Redis client could not tell apart from a publish just before or
 *      after.
 *  (4) A slow subscriber never slows a publisher: the inbox is unbounded
 *      and the owner cuts off a subscriber whose pending output passes
 *      `client-output-buffer-limit pubsub`, as Redis does.
 */
#include "server/pubsub.h"

#include <ck_pr.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/client.h"
#include "server/conn.h"
#include "server/log.h"
#include "server/node.h"
#include "server/strutil.h"
#include "server/worker.h"

/* ---- a small binary-keyed hash table ---- */

struct ps_dent {
	struct ps_dent *next;
	uint64_t h;
	size_t len;
	void *val;
	char key[];
};

struct ps_dict {
	struct ps_dent **b;
	size_t nb, n;
};

static uint64_t hash_bytes(const char *p, size_t len)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static struct ps_dent *dict_find(const struct ps_dict *d, const char *k, size_t len)
{
	if (!d->nb)
		return NULL;
	uint64_t h = hash_bytes(k, len);
	for (struct ps_dent *e = d->b[h & (d->nb - 1)]; e; e = e->next)
		if (e->h == h && e->len == len && memcmp(e->key, k, len) == 0)
			return e;
	return NULL;
}

static int dict_grow(struct ps_dict *d)
{
	size_t nb = d->nb ? d->nb * 2 : 16;
	struct ps_dent **b = calloc(nb, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < d->nb; i++) {
		struct ps_dent *e = d->b[i], *next;
		for (; e; e = next) {
			next = e->next;
			e->next = b[e->h & (nb - 1)];
			b[e->h & (nb - 1)] = e;
		}
	}
	free(d->b);
	d->b = b;
	d->nb = nb;
	return 0;
}

/* Add a key known to be absent; its val is NULL. */
static struct ps_dent *dict_add(struct ps_dict *d, const char *k, size_t len)
{
	if (d->n >= d->nb && dict_grow(d) != 0)
		return NULL;
	struct ps_dent *e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return NULL;
	e->h = hash_bytes(k, len);
	e->len = len;
	e->val = NULL;
	memcpy(e->key, k, len);
	e->key[len] = '\0';
	struct ps_dent **slot = &d->b[e->h & (d->nb - 1)];
	e->next = *slot;
	*slot = e;
	d->n++;
	return e;
}

/* Unlink and free e (its val is the caller's). */
static void dict_del(struct ps_dict *d, struct ps_dent *e)
{
	struct ps_dent **p = &d->b[e->h & (d->nb - 1)];
	while (*p != e)
		p = &(*p)->next;
	*p = e->next;
	d->n--;
	free(e);
}

#define DICT_EACH(d, e)                                   \
	for (size_t i_ = 0; i_ < (d)->nb; i_++)           \
		for (struct ps_dent *e = (d)->b[i_], *n_ = e ? e->next : NULL; e; \
		     e = n_, n_ = e ? e->next : NULL)

static void dict_free(struct ps_dict *d, void (*free_val)(void *))
{
	DICT_EACH(d, e)
	{
		if (free_val)
			free_val(e->val);
		free(e);
	}
	free(d->b);
	d->b = NULL;
	d->nb = d->n = 0;
}

/* ---- the node's registry ---- */

/* Subscribers of one channel or pattern: in total and per worker. */
struct ps_reg {
	uint64_t total;
	uint32_t per[]; /* [nworkers] */
};

struct ps_node {
	/* Workers with a MONITOR client, a bit each: its owner sets and
	 * clears its bit (ck_pr_or/and); every command loads it. Alone on its
	 * cache line, written only when a monitor comes or goes. */
	uint64_t monitor_mask __attribute__((aligned(64)));
	pthread_rwlock_t lock __attribute__((aligned(64))); /* guards every field below */
	int nworkers;
	struct ps_dict by_kind[3]; /* enum ps_kind -> struct ps_reg */
};

int ps_node_create(struct node *n, int nworkers)
{
	size_t size = (sizeof(struct ps_node) + 63) & ~(size_t)63;
	struct ps_node *p = aligned_alloc(64, size); /* its cache-line alignment */
	if (!p)
		return -ENOMEM;
	memset(p, 0, size);
	pthread_rwlock_init(&p->lock, NULL);
	p->nworkers = nworkers;
	n->pubsub = p;
	return 0;
}

void ps_node_destroy(struct node *n)
{
	struct ps_node *p = n->pubsub;
	if (!p)
		return;
	for (int k = 0; k < 3; k++)
		dict_free(&p->by_kind[k], free);
	pthread_rwlock_destroy(&p->lock);
	free(p);
	n->pubsub = NULL;
}

/* Count one subscriber more (delta 1) or less (-1) of worker wid. */
static int reg_update(struct ps_node *p, int kind, const char *name, size_t len, int wid,
		      int delta)
{
	int rc = 0;
	pthread_rwlock_wrlock(&p->lock);
	struct ps_dict *d = &p->by_kind[kind];
	struct ps_dent *e = dict_find(d, name, len);
	if (!e && delta > 0) {
		struct ps_reg *r = calloc(1, sizeof(*r) + (size_t)p->nworkers * sizeof(uint32_t));
		if (!r || !(e = dict_add(d, name, len))) {
			free(r);
			rc = -ENOMEM;
			goto out;
		}
		e->val = r;
	}
	if (e) {
		struct ps_reg *r = e->val;
		r->total += (uint64_t)(int64_t)delta;
		r->per[wid] += (uint32_t)delta;
		if (r->total == 0) {
			free(r);
			dict_del(d, e);
		}
	}
out:
	pthread_rwlock_unlock(&p->lock);
	return rc;
}

/* ---- messages and inboxes ---- */

struct ps_msg;
struct ps_env {
	struct ps_env *next;
	struct ps_msg *m;
};

/* One published message (invariant (2)); the bytes of its channel, then
 * of its payload, follow the envelopes. */
struct ps_msg {
	unsigned refs;
	int kind;
	size_t clen, mlen;
	const char *ch, *msg;
	struct ps_env env[];
};

/* A worker's clients subscribed to one name. */
struct ps_subs {
	int n, cap;
	struct client **cl;
};

struct ps_worker {
	struct ps_env *inbox;      /* any thread pushes (CAS); the owner swaps */
	struct ps_dict local[3];   /* owner only: enum ps_kind -> struct ps_subs */
	struct ps_subs monitors;   /* owner only: its MONITOR clients */
};

/* A client's subscriptions (client.h: cl->ps), owner only. */
struct ps_client {
	struct ps_dict names[3];   /* enum ps_kind -> NULL */
	struct resp_w deferred;    /* messages that came while it ran a command */
	time_t soft_since;         /* over the soft limit since, or 0 */
};

static void subs_free(void *v)
{
	struct ps_subs *s = v;
	if (s)
		free(s->cl);
	free(s);
}

struct ps_worker *ps_worker_create(void)
{
	return calloc(1, sizeof(struct ps_worker));
}

void ps_worker_destroy(struct ps_worker *pw)
{
	if (!pw)
		return;
	struct ps_env *e = ck_pr_fas_ptr(&pw->inbox, NULL);
	while (e) {
		struct ps_env *next = e->next;
		if (ck_pr_faa_uint(&e->m->refs, (unsigned)-1) == 1)
			free(e->m);
		e = next;
	}
	for (int k = 0; k < 3; k++)
		dict_free(&pw->local[k], subs_free);
	free(pw->monitors.cl);
	free(pw);
}

static int send_local(struct node *n, struct worker *self, uint64_t mask, int kind,
		      const char *ch, size_t clen, const char *msg, size_t mlen);

/* The receivers of a message on ch, and in *mask the workers they are on. */
static long long count_local(struct ps_node *p, int kind, const char *ch, size_t clen,
			     uint64_t *maskp)
{
	uint64_t mask = 0; /* workers to send to (threads <= 64) */
	long long count = 0;
	pthread_rwlock_rdlock(&p->lock);
	struct ps_dent *e = dict_find(&p->by_kind[kind], ch, clen);
	if (e) {
		struct ps_reg *r = e->val;
		count += (long long)r->total;
		for (int i = 0; i < p->nworkers; i++)
			if (r->per[i])
				mask |= 1ULL << i;
	}
	if (kind == PS_CHANNEL) {
		DICT_EACH(&p->by_kind[PS_PATTERN], pe)
		{
			if (!srv_strmatch(pe->key, pe->len, ch, clen, false))
				continue;
			struct ps_reg *r = pe->val;
			count += (long long)r->total;
			for (int i = 0; i < p->nworkers; i++)
				if (r->per[i])
					mask |= 1ULL << i;
		}
	}
	pthread_rwlock_unlock(&p->lock);
	*maskp = mask;
	return count;
}

long long ps_publish_local(struct node *n, struct worker *self, int kind, const char *ch,
			   size_t clen, const char *msg, size_t mlen)
{
	struct ps_node *p = n->pubsub;
	uint64_t mask;
	long long count = count_local(p, kind, ch, clen, &mask);
	if (!mask)
		return count;
	return send_local(n, self, mask, kind, ch, clen, msg, mlen) == 0 ? count : -ENOMEM;
}

long long ps_publish(struct worker *w, int kind, const char *ch, size_t clen, const char *msg,
		     size_t mlen)
{
	struct node *n = w->node;
	if (n->cops && n->cops->publish)
		return n->cops->publish(n, w, kind, ch, clen, msg, mlen);
	return ps_publish_local(n, w, kind, ch, clen, msg, mlen);
}

/* The deferred publishes of a client: records of this header, then the
 * channel and message bytes, in cl->psq. */
struct ps_rec {
	int kind;
	size_t clen, mlen;
};

long long ps_defer(struct worker *w, struct client *cl, int kind, const char *ch, size_t clen,
		   const char *msg, size_t mlen)
{
	struct ps_rec r = { .kind = kind, .clen = clen, .mlen = mlen };
	size_t need = cl->psq.len + sizeof(r) + clen + mlen;
	resp_w_raw(&cl->psq, &r, sizeof(r));
	resp_w_raw(&cl->psq, ch, clen);
	resp_w_raw(&cl->psq, msg, mlen);
	if (cl->psq.len != need)
		return -ENOMEM;
	uint64_t mask;
	/* This node's receivers: the other nodes' are counted when it is
	 * sent, after the reply was written. */
	return count_local(w->node->pubsub, kind, ch, clen, &mask);
}

void ps_defer_reset(struct client *cl)
{
	resp_w_reset(&cl->psq);
}

void ps_defer_send(struct worker *w, struct client *cl)
{
	size_t off = 0;
	while (off + sizeof(struct ps_rec) <= cl->psq.len) {
		struct ps_rec r;
		memcpy(&r, cl->psq.p + off, sizeof(r));
		const char *ch = cl->psq.p + off + sizeof(r);
		(void)ps_publish(w, r.kind, ch, r.clen, ch + r.clen, r.mlen);
		off += sizeof(r) + r.clen + r.mlen;
	}
	resp_w_reset(&cl->psq);
}

/* Push a message onto the inboxes of the workers in mask (invariant (1)).
 * 0 or -ENOMEM. */
static int send_local(struct node *n, struct worker *self, uint64_t mask, int kind,
		      const char *ch, size_t clen, const char *msg, size_t mlen)
{
	struct ps_node *p = n->pubsub;
	unsigned nt = (unsigned)__builtin_popcountll(mask);
	struct ps_msg *m = malloc(sizeof(*m) + nt * sizeof(struct ps_env) + clen + mlen);
	if (!m)
		return -ENOMEM;
	char *bytes = (char *)&m->env[nt];
	memcpy(bytes, ch, clen);
	memcpy(bytes + clen, msg, mlen);
	m->refs = nt;
	m->kind = kind;
	m->clen = clen;
	m->mlen = mlen;
	m->ch = bytes;
	m->msg = bytes + clen;
	/* The message is complete before its first push: the CAS publishes
	 * it to the owner, who reads it after its swap (ck_pr_fas_ptr). */
	ck_pr_fence_store();
	unsigned k = 0;
	for (int i = 0; i < p->nworkers; i++) {
		if (!(mask & (1ULL << i)))
			continue;
		struct worker *w = n->workers[i];
		struct ps_env *env = &m->env[k++];
		env->m = m;
		struct ps_env *old;
		do {
			old = ck_pr_load_ptr(&w->ps->inbox);
			env->next = old;
		} while (!ck_pr_cas_ptr(&w->ps->inbox, old, env));
		/* A non-empty inbox already has its wake; the calling worker
		 * drains its own at the end of this round (worker.c) and needs
		 * none: one eventfd write saved per message to itself. */
		if (!old && w != self)
			worker_wake(w);
	}
	return 0;
}

/* ---- delivery (owner worker) ---- */

static struct ps_client *client_ps(struct client *cl)
{
	if (!cl->ps) {
		cl->ps = calloc(1, sizeof(*cl->ps));
		if (cl->ps)
			resp_w_init(&cl->ps->deferred, cl->proto);
	}
	return cl->ps;
}

/* Redis's checkClientOutputBufferLimits for the pubsub class: pending
 * output over the hard limit, or over the soft limit for soft-seconds,
 * closes the client. */
static bool over_limit(struct client *cl)
{
	struct node *n = cl->w->node;
	uint64_t hard = ck_pr_load_64(&n->cfg.cobl[SRV_COBL_PUBSUB][0]);
	uint64_t soft = ck_pr_load_64(&n->cfg.cobl[SRV_COBL_PUBSUB][1]);
	uint64_t secs = ck_pr_load_64(&n->cfg.cobl[SRV_COBL_PUBSUB][2]);
	uint64_t pending = cl->out.len - cl->out_sent + cl->ps->deferred.len;
	if (hard && pending >= hard)
		return true;
	if (soft && pending >= soft) {
		time_t now = time(NULL);
		if (!cl->ps->soft_since) {
			cl->ps->soft_since = now; /* as Redis: never on the first sight */
			return false;
		}
		return (uint64_t)(now - cl->ps->soft_since) >= secs;
	}
	cl->ps->soft_since = 0;
	return false;
}

static void deliver(struct client *cl, const struct ps_msg *m, const char *pat, size_t plen)
{
	if (cl->flags & (CL_CLOSE_ASAP | CL_CLOSE_AFTER_REPLY))
		return;
	bool running = cl->flags & CL_RUNNING;
	struct resp_w *o = running ? &cl->ps->deferred : &cl->out;
	o->proto = cl->proto;
	if (m->kind == PS_MONITOR) {
		/* A monitor is a normal client to client-output-buffer-limit,
		 * whose limits are 0 (none), as in Redis. */
		resp_w_raw(o, m->msg, m->mlen);
		if (!running)
			client_queue_write(cl);
		return;
	}
	if (pat) {
		resp_push(o, 4);
		resp_bulk(o, "pmessage", 8);
		resp_bulk(o, pat, plen);
	} else {
		resp_push(o, 3);
		if (m->kind == PS_SHARD)
			resp_bulk(o, "smessage", 8);
		else
			resp_bulk(o, "message", 7);
	}
	resp_bulk(o, m->ch, m->clen);
	resp_bulk(o, m->msg, m->mlen);
	if (over_limit(cl)) {
		srv_log(cl->w->node, LOG_WARNING,
			"Client id=%llu addr=%s name=%s scheduled to be closed ASAP for overcoming "
			"of output buffer limits.",
			(unsigned long long)cl->id, cl->addr, cl->name ? cl->name : "");
		cl->w->stats.pubsub_cutoffs++;
		cl->flags |= CL_CLOSE_ASAP;
		/* Closed by client_flush_pending (or when its coroutine ends),
		 * not here: the subscriber lists are being walked. */
	}
	if (!running)
		client_queue_write(cl);
}

static void deliver_subs(struct ps_subs *s, const struct ps_msg *m, const char *pat,
			 size_t plen)
{
	for (int i = 0; i < s->n; i++)
		deliver(s->cl[i], m, pat, plen);
}

/* CLIENT KILL: the owner closes its client (at the end of the round,
 * client_flush_pending, or when its coroutine finishes). */
static void kill_local(struct worker *w, const struct ps_msg *m)
{
	uint64_t id;
	memcpy(&id, m->msg, sizeof(id));
	for (struct client *cl = w->clients; cl; cl = cl->next) {
		if (cl->id != id)
			continue;
		cl->flags |= CL_CLOSE_ASAP;
		if (!(cl->flags & CL_RUNNING))
			client_queue_write(cl);
		break;
	}
}

void ps_worker_drain(struct worker *w)
{
	struct ps_worker *pw = w->ps;
	if (!ck_pr_load_ptr(&pw->inbox))
		return;
	struct ps_env *e = ck_pr_fas_ptr(&pw->inbox, NULL), *fifo = NULL;
	ck_pr_fence_load(); /* the messages' bytes after the envelopes */
	while (e) { /* newest first: reverse (invariant (1)) */
		struct ps_env *next = e->next;
		e->next = fifo;
		fifo = e;
		e = next;
	}
	for (e = fifo; e;) {
		struct ps_env *next = e->next;
		struct ps_msg *m = e->m;
		if (m->kind == PS_KILL)
			kill_local(w, m);
		struct ps_dent *d = m->kind >= PS_MONITOR
					    ? NULL
					    : dict_find(&pw->local[m->kind], m->ch, m->clen);
		if (d)
			deliver_subs(d->val, m, NULL, 0);
		if (m->kind == PS_MONITOR)
			deliver_subs(&pw->monitors, m, NULL, 0);
		if (m->kind == PS_CHANNEL) {
			DICT_EACH(&pw->local[PS_PATTERN], pe)
			{
				if (srv_strmatch(pe->key, pe->len, m->ch, m->clen, false))
					deliver_subs(pe->val, m, pe->key, pe->len);
			}
		}
		w->stats.pubsub_delivered++;
		if (ck_pr_faa_uint(&m->refs, (unsigned)-1) == 1)
			free(m);
		e = next;
	}
}

bool ps_worker_pending(struct worker *w)
{
	return ck_pr_load_ptr(&w->ps->inbox) != NULL;
}

void ps_client_flush_deferred(struct client *cl)
{
	if (!cl->ps || !cl->ps->deferred.len)
		return;
	resp_w_append(&cl->out, &cl->ps->deferred);
	resp_w_reset(&cl->ps->deferred);
}

/* ---- MONITOR ---- */

int ps_monitor_add(struct client *cl)
{
	struct ps_worker *pw = cl->w->ps;
	struct ps_subs *s = &pw->monitors;
	if (cl->flags & CL_MONITOR)
		return 0;
	if (!client_ps(cl))
		return -ENOMEM; /* its side buffer takes lines while it runs */
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 4;
		struct client **p = realloc(s->cl, (size_t)cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->cl = p;
		s->cap = cap;
	}
	s->cl[s->n++] = cl;
	cl->flags |= CL_MONITOR;
	ck_pr_or_64(&cl->w->node->pubsub->monitor_mask, 1ULL << cl->w->id);
	return 0;
}

void ps_monitor_remove(struct client *cl)
{
	if (!(cl->flags & CL_MONITOR))
		return;
	struct ps_subs *s = &cl->w->ps->monitors;
	for (int i = 0; i < s->n; i++) {
		if (s->cl[i] == cl) {
			s->cl[i] = s->cl[--s->n];
			break;
		}
	}
	cl->flags &= ~CL_MONITOR;
	if (s->n == 0)
		ck_pr_and_64(&cl->w->node->pubsub->monitor_mask, ~(1ULL << cl->w->id));
}

void ps_kill_send(struct node *n, struct worker *self, int wid, uint64_t id)
{
	(void)send_local(n, self, 1ULL << wid, PS_KILL, "", 0, (const char *)&id, sizeof(id));
}

uint64_t ps_monitor_mask(struct node *n)
{
	return n->pubsub ? ck_pr_load_64(&n->pubsub->monitor_mask) : 0;
}

void ps_monitor_send(struct node *n, struct worker *self, const char *line, size_t len)
{
	uint64_t mask = ps_monitor_mask(n);
	if (mask)
		(void)send_local(n, self, mask, PS_MONITOR, "", 0, line, len);
}

/* ---- subscriptions (owner worker) ---- */

static void update_flag(struct client *cl)
{
	for (int k = 0; k < 3; k++)
		cl->nsubs[k] = cl->ps ? (long)cl->ps->names[k].n : 0;
	if (ps_client_count(cl, PS_CHANNEL) + ps_client_count(cl, PS_PATTERN) +
	    ps_client_count(cl, PS_SHARD))
		cl->flags |= CL_PUBSUB;
	else
		cl->flags &= ~CL_PUBSUB;
}

int ps_subscribe(struct client *cl, int kind, const char *name, size_t len)
{
	struct ps_client *pc = client_ps(cl);
	struct ps_worker *pw = cl->w->ps;
	if (!pc)
		return -ENOMEM;
	if (dict_find(&pc->names[kind], name, len))
		return 0;
	struct ps_dent *le = dict_find(&pw->local[kind], name, len);
	if (!le) {
		struct ps_subs *s = calloc(1, sizeof(*s));
		if (!s || !(le = dict_add(&pw->local[kind], name, len))) {
			free(s);
			return -ENOMEM;
		}
		le->val = s;
	}
	struct ps_subs *s = le->val;
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 4;
		struct client **p = realloc(s->cl, (size_t)cap * sizeof(*p));
		if (!p)
			goto undo_local;
		s->cl = p;
		s->cap = cap;
	}
	if (!dict_add(&pc->names[kind], name, len))
		goto undo_local;
	if (reg_update(cl->w->node->pubsub, kind, name, len, cl->w->id, 1) != 0) {
		dict_del(&pc->names[kind], dict_find(&pc->names[kind], name, len));
		goto undo_local;
	}
	s->cl[s->n++] = cl;
	update_flag(cl);
	return 1;
undo_local:
	if (s->n == 0) {
		subs_free(s);
		dict_del(&pw->local[kind], le);
	}
	return -ENOMEM;
}

int ps_unsubscribe(struct client *cl, int kind, const char *name, size_t len)
{
	struct ps_client *pc = cl->ps;
	struct ps_dent *ce = pc ? dict_find(&pc->names[kind], name, len) : NULL;
	if (!ce)
		return 0;
	struct ps_worker *pw = cl->w->ps;
	struct ps_dent *le = dict_find(&pw->local[kind], name, len);
	if (le) {
		struct ps_subs *s = le->val;
		for (int i = 0; i < s->n; i++) {
			if (s->cl[i] == cl) {
				/* Keep the order of the others: delivery order
				 * between subscribers is not promised, but
				 * stable is kinder to readers of logs. */
				memmove(&s->cl[i], &s->cl[i + 1], (size_t)(s->n - i - 1) * sizeof(*s->cl));
				s->n--;
				break;
			}
		}
		if (s->n == 0) {
			subs_free(s);
			dict_del(&pw->local[kind], le);
		}
	}
	(void)reg_update(cl->w->node->pubsub, kind, name, len, cl->w->id, -1);
	dict_del(&pc->names[kind], ce); /* last: name may be its key (ps_client_drop) */
	update_flag(cl);
	return 1;
}

void ps_client_each(struct client *cl, int kind,
		    void (*fn)(void *arg, const char *name, size_t len), void *arg)
{
	if (!cl->ps)
		return;
	DICT_EACH(&cl->ps->names[kind], e)
	{
		fn(arg, e->key, e->len);
	}
}

long ps_client_count(const struct client *cl, int kind)
{
	return cl->nsubs[kind];
}

static void drop_one(void *arg, const char *name, size_t len)
{
	void **a = arg;
	ps_unsubscribe(a[0], (int)(intptr_t)a[1], name, len);
}

void ps_client_drop(struct client *cl)
{
	ps_monitor_remove(cl);
	if (!cl->ps)
		return;
	for (int k = 0; k < 3; k++) {
		void *a[2] = { cl, (void *)(intptr_t)k };
		ps_client_each(cl, k, drop_one, a);
		dict_free(&cl->ps->names[k], NULL);
	}
	resp_w_free(&cl->ps->deferred);
	free(cl->ps);
	cl->ps = NULL;
	update_flag(cl);
}

/* ---- introspection (any thread) ---- */

void ps_node_channels(struct node *n, int kind, const char *pat, size_t plen,
		      void (*fn)(void *arg, const char *name, size_t len), void *arg)
{
	struct ps_node *p = n->pubsub;
	pthread_rwlock_rdlock(&p->lock);
	DICT_EACH(&p->by_kind[kind], e)
	{
		if (!pat || srv_strmatch(pat, plen, e->key, e->len, false))
			fn(arg, e->key, e->len);
	}
	pthread_rwlock_unlock(&p->lock);
}

long long ps_node_numsub(struct node *n, int kind, const char *ch, size_t clen)
{
	struct ps_node *p = n->pubsub;
	pthread_rwlock_rdlock(&p->lock);
	struct ps_dent *e = dict_find(&p->by_kind[kind], ch, clen);
	long long v = e ? (long long)((struct ps_reg *)e->val)->total : 0;
	pthread_rwlock_unlock(&p->lock);
	return v;
}

long long ps_node_count(struct node *n, int kind)
{
	struct ps_node *p = n->pubsub;
	if (!p)
		return 0;
	pthread_rwlock_rdlock(&p->lock);
	long long v = (long long)p->by_kind[kind].n;
	pthread_rwlock_unlock(&p->lock);
	return v;
}
