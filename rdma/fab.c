/*
 * fab.c: the backend-independent half of the fabric: backend registry,
 * batches, counters and latency injection. See fab.h for the contract.
 */
#include "rdma/fab.h"

#include <ck_pr.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "rdma/fab_apply.h"
#include "rdma/fab_internal.h"

static const struct fab_backend *const backends[] = {
	&fab_shm_backend,
	&fab_tcp_backend,
	&fab_verbs_backend,
};

int fab_open(const struct fab_config *cfg, struct fab **out, char *err, size_t errlen)
{
	const struct fab_backend *be = NULL;
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (strcmp(backends[i]->name, cfg->backend) == 0)
			be = backends[i];
	if (!be) {
		snprintf(err, errlen, "unknown fabric backend '%s' (shm, tcp or verbs)", cfg->backend);
		return -EINVAL;
	}
	if (cfg->self >= FAB_MAX_NODES) {
		snprintf(err, errlen, "node id %u out of range (max %d)", cfg->self, FAB_MAX_NODES - 1);
		return -EINVAL;
	}
	struct fab *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->cfg = *cfg;
	snprintf(f->device, sizeof(f->device), "%s", cfg->device ? cfg->device : "");
	f->cfg.device = f->device;
	f->be = be;
	pthread_mutex_init(&f->rpc_mu, NULL);
	f->rpc[FAB_RPC_OPS].fn = fab_ops_handler;
	f->rpc[FAB_RPC_OPS].arg = f;
	snprintf(f->rpc[FAB_RPC_OPS].name, sizeof(f->rpc[FAB_RPC_OPS].name), "fab.ops");
	if (be->open) {
		int rc = be->open(f, err, errlen);
		if (rc) {
			pthread_mutex_destroy(&f->rpc_mu);
			free(f);
			return rc;
		}
	}
	*out = f;
	return 0;
}

void fab_close(struct fab *f)
{
	if (!f)
		return;
	if (f->be->close)
		f->be->close(f);
	pthread_mutex_destroy(&f->rpc_mu);
	free(f);
}

int fab_attach(struct fab *f, uint16_t node, void *base, uint64_t size)
{
	char err[256];
	return fab_attach_err(f, node, base, size, err, sizeof(err));
}

int fab_attach_err(struct fab *f, uint16_t node, void *base, uint64_t size, char *err,
		   size_t errlen)
{
	if (node >= FAB_MAX_NODES || node != f->cfg.self) {
		snprintf(err, errlen, "fab_attach: node %u is not this node (%u)", node, f->cfg.self);
		return -EINVAL;
	}
	struct fab_peer *p = &f->peers[node];
	p->attached = true;
	p->base = base;
	p->size = size;
	/* A node reaches its own region by CPU, except on verbs, where NIC
	 * atomics are not atomic with CPU atomics and the own region goes
	 * through a loopback queue pair (DESIGN.md section 8). */
	p->direct = f->be != &fab_verbs_backend;
	p->info.node = node;
	p->info.region_size = size;
	if (f->be->attach_self)
		return f->be->attach_self(f, err, errlen);
	return 0;
}

int fab_attach_peer(struct fab *f, const struct fab_peer_info *pi, char *err, size_t errlen)
{
	if (pi->node >= FAB_MAX_NODES || pi->node == f->cfg.self) {
		snprintf(err, errlen, "bad peer node id %u", pi->node);
		return -EINVAL;
	}
	struct fab_peer *p = &f->peers[pi->node];
	p->info = *pi;
	p->size = pi->region_size;
	int rc = f->be->attach_peer(f, pi, err, errlen);
	if (rc == 0)
		p->attached = true;
	return rc;
}

void fab_peer_back(struct fab *f, uint16_t node)
{
	if (node >= FAB_MAX_NODES)
		return;
	ck_pr_inc_32(&f->peers[node].back);
	if (f->be->peer_back)
		f->be->peer_back(f, node);
}

void fab_fence(struct fab *f, uint16_t node)
{
	if (node >= FAB_MAX_NODES || node == f->cfg.self)
		return;
	ck_pr_store_8(&f->peers[node].fenced, 1);
	ck_pr_fence_store();
	if (f->be->fence)
		f->be->fence(f, node);
}

void fab_unfence(struct fab *f, uint16_t node)
{
	if (node >= FAB_MAX_NODES)
		return;
	ck_pr_store_8(&f->peers[node].fenced, 0);
	fab_peer_back(f, node);
}

void fab_set_lease(struct fab *f, const uint64_t *until_ns)
{
	ck_pr_store_ptr(&f->lease, (void *)until_ns);
}

/* fab_set_lease: has this node's lease run out? */
static bool lease_lapsed(const struct fab *f)
{
	const uint64_t *l = ck_pr_load_ptr(&f->lease);
	if (!l)
		return false;
	uint64_t until = ck_pr_load_64((uint64_t *)l);
	if (!until)
		return false;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec >= until;
}

bool fab_fenced(const struct fab *f, uint16_t node)
{
	return node < FAB_MAX_NODES && ck_pr_load_8((uint8_t *)&f->peers[node].fenced);
}

int fab_lose_replies(struct fab *f, uint16_t node, uint32_t count, uint32_t after)
{
	if (strcmp(f->be->name, "tcp") != 0)
		return -ENOTSUP;
	if (node >= FAB_MAX_NODES || node == f->cfg.self || !f->peers[node].attached)
		return -EINVAL;
	ck_pr_store_32(&f->peers[node].lose_after, after);
	ck_pr_store_32(&f->peers[node].lose, count);
	return 0;
}

int fab_adopt(struct fab *f, int fd, uint16_t from, uint16_t worker)
{
	if (fab_fenced(f, from))
		return -EACCES;
	return f->be->adopt ? f->be->adopt(f, fd, from, worker) : -ENOTSUP;
}

int fab_ctl(struct fab *f, const void *req, size_t len, void *resp, size_t *resp_len)
{
	return f->be->ctl ? f->be->ctl(f, req, len, resp, resp_len) : -ENOTSUP;
}

const char *fab_backend_name(const struct fab *f) { return f->be->name; }

uint16_t fab_self(const struct fab *f) { return f->cfg.self; }

void *fab_local_base(const struct fab *f, uint16_t node)
{
	return node < FAB_MAX_NODES ? f->peers[node].base : NULL;
}

bool fab_node_direct(const struct fab *f, uint16_t node)
{
	return node < FAB_MAX_NODES && f->peers[node].attached && f->peers[node].direct;
}

bool fab_node_near(const struct fab *f, uint16_t node)
{
	return node < FAB_MAX_NODES && f->peers[node].attached && f->peers[node].direct &&
	       !f->cfg.delay_us;
}

uint64_t fab_attached_nodes(const struct fab *f)
{
	uint64_t m = 0;
	for (unsigned nd = 0; nd < FAB_MAX_NODES; nd++)
		if (f->peers[nd].attached)
			m |= 1ull << nd;
	return m;
}

uint64_t fab_region_size(const struct fab *f, uint16_t node)
{
	return node < FAB_MAX_NODES ? f->peers[node].size : 0;
}

struct fab_worker *fab_worker_create_err(struct fab *f, int worker_id, char *err, size_t errlen)
{
	char dummy[128];
	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	struct fab_worker *fw = calloc(1, sizeof(*fw));
	if (!fw) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	fw->f = f;
	fw->id = worker_id;
	if (f->track && !(fw->dirty = calloc(1, sizeof(*fw->dirty)))) {
		snprintf(err, errlen, "out of memory");
		free(fw);
		return NULL;
	}
	pthread_mutex_init(&fw->inbox_mu, NULL);
	fw->inbox_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fw->inbox_fd < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	if (f->be->worker_init && f->be->worker_init(fw, err, errlen) != 0)
		goto fail;
	if (worker_id >= 0 && worker_id < FAB_MAX_NODES) {
		pthread_mutex_lock(&f->rpc_mu);
		f->workers[worker_id] = fw;
		pthread_mutex_unlock(&f->rpc_mu);
	}
	return fw;
fail:
	if (fw->inbox_fd >= 0)
		close(fw->inbox_fd);
	pthread_mutex_destroy(&fw->inbox_mu);
	free(fw->dirty);
	free(fw);
	return NULL;
}

struct fab_worker *fab_worker_create(struct fab *f, int worker_id)
{
	return fab_worker_create_err(f, worker_id, NULL, 0);
}

void fab_worker_destroy(struct fab_worker *fw)
{
	if (!fw)
		return;
	struct fab *f = fw->f;
	pthread_mutex_lock(&f->rpc_mu);
	if (fw->id >= 0 && fw->id < FAB_MAX_NODES && f->workers[fw->id] == fw)
		f->workers[fw->id] = NULL;
	pthread_mutex_unlock(&f->rpc_mu);
	/* Requests delivered and never run: their initiators hear why (before
	 * the backend's state, which their answers may use, goes). */
	struct fab_rpc_call *c = fw->inbox;
	fw->inbox = fw->inbox_tail = NULL;
	while (c) {
		struct fab_rpc_call *next = c->next;
		c->fw = fw;
		c->done(c, -ESHUTDOWN, 0);
		c = next;
	}
	if (f->be->worker_fini)
		f->be->worker_fini(fw);
	close(fw->inbox_fd);
	pthread_mutex_destroy(&fw->inbox_mu);
	free(fw->dirty);
	free(fw);
}

int fab_worker_fds(struct fab_worker *fw, int *fds, int max)
{
	struct fab *f = fw->f;
	int k = f->be->worker_fds ? f->be->worker_fds(fw, fds, max) : 0;
	if (k < max)
		fds[k++] = fw->inbox_fd;
	if (f->aux.fd && k < max) {
		int fd = f->aux.fd(f->aux.arg, fw->id);
		if (fd >= 0)
			fds[k++] = fd;
	}
	return k;
}

void fab_worker_flush(struct fab_worker *fw)
{
	if (fw->f->be->flush)
		fw->f->be->flush(fw);
}

uint64_t fab_worker_doorbells(const struct fab_worker *fw) { return fw->doorbells; }

uint64_t fab_worker_breaks(const struct fab_worker *fw) { return fw->breaks; }

/* Run the requests delivered to this worker (or hand them to its runner). */
static int run_inbox(struct fab_worker *fw)
{
	/* The eventfd is read only while writes to it may be unread, so a
	 * poll costs no system call for it, and a level-triggered epoll never
	 * spins on a count left behind. */
	if (ck_pr_load_64(&fw->inbox_pushed) != fw->inbox_seen) {
		uint64_t v;
		if (read(fw->inbox_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
			fw->inbox_seen += v;
	}
	if (!ck_pr_load_ptr(&fw->inbox))
		return 0;
	pthread_mutex_lock(&fw->inbox_mu);
	struct fab_rpc_call *c = fw->inbox;
	fw->inbox = fw->inbox_tail = NULL;
	pthread_mutex_unlock(&fw->inbox_mu);
	int k = 0;
	while (c) {
		struct fab_rpc_call *next = c->next;
		c->fw = fw;
		if (fw->rpc_run)
			fw->rpc_run(fw->rpc_ctx, c);
		else
			fab_rpc_run(c);
		c = next;
		k++;
	}
	return k;
}

int fab_worker_poll(struct fab_worker *fw)
{
	struct fab *f = fw->f;
	fab_worker_flush(fw);
	int k = f->be->poll ? f->be->poll(fw) : 0;
	k += run_inbox(fw);
	if (f->aux.poll)
		k += f->aux.poll(f->aux.arg, fw->id);
	return k;
}

/* ---- two-sided RPC ---- */

int fab_rpc_register(struct fab *f, uint16_t id, const char *name, fab_rpc_fn fn, void *arg)
{
	if (id >= FAB_RPC_OPS || !fn || f->rpc[id].fn)
		return -EINVAL;
	f->rpc[id].fn = fn;
	f->rpc[id].arg = arg;
	snprintf(f->rpc[id].name, sizeof(f->rpc[id].name), "%s", name ? name : "");
	return 0;
}

const char *fab_rpc_name(const struct fab *f, uint16_t id)
{
	return id < FAB_RPC_HANDLERS && f->rpc[id].fn ? f->rpc[id].name : "(none)";
}

void fab_worker_set_rpc_runner(struct fab_worker *fw,
			       void (*run)(void *ctx, struct fab_rpc_call *c), void *ctx)
{
	fw->rpc_run = run;
	fw->rpc_ctx = ctx;
}

void fab_rpc_reply(struct fab_rpc_call *c, int status, uint32_t len)
{
	if (status >= 0 && len > c->cap)
		status = -EMSGSIZE;
	c->done(c, status, status >= 0 ? len : 0);
}

void fab_rpc_run(struct fab_rpc_call *c)
{
	const struct fab *f = c->fw->f;
	uint32_t len = 0;
	int rc = -EOPNOTSUPP; /* no handler of that id here */
	if (c->handler < FAB_RPC_HANDLERS && f->rpc[c->handler].fn)
		rc = f->rpc[c->handler].fn(f->rpc[c->handler].arg, c, &len);
	if (rc != FAB_RPC_DEFER)
		fab_rpc_reply(c, rc, len);
}

void fab_worker_inbox_push(struct fab_worker *fw, struct fab_rpc_call *c)
{
	c->next = NULL;
	pthread_mutex_lock(&fw->inbox_mu);
	if (fw->inbox_tail)
		fw->inbox_tail->next = c;
	else
		fw->inbox = c;
	fw->inbox_tail = c;
	pthread_mutex_unlock(&fw->inbox_mu);
	fab_worker_wake(fw);
}

void fab_worker_post_call(struct fab_worker *fw, struct fab_rpc_call *c)
{
	c->fw = fw;
	c->from = c->to = fw->f->cfg.self;
	fab_worker_inbox_push(fw, c);
}

int fab_worker_id(const struct fab_worker *fw) { return fw->id; }

void fab_worker_wake(struct fab_worker *fw)
{
	ck_pr_inc_64(&fw->inbox_pushed); /* before the write: run_inbox */
	uint64_t v = 1;
	ssize_t r = write(fw->inbox_fd, &v, sizeof(v));
	(void)r;
}

void fab_rpc_deliver(struct fab *f, int worker_hint, struct fab_rpc_call *c)
{
	pthread_mutex_lock(&f->rpc_mu);
	int n = 0;
	while (n < FAB_MAX_NODES && f->workers[n])
		n++;
	struct fab_worker *fw = n ? f->workers[(unsigned)worker_hint % (unsigned)n] : NULL;
	c->to = f->cfg.self;
	if (fw)
		fab_worker_inbox_push(fw, c);
	pthread_mutex_unlock(&f->rpc_mu);
	if (!fw)
		c->done(c, -EAGAIN, 0);
}

/* A call of ours to our own node (a part of RPCs on the own region): it
 * runs on this very worker, at its next poll. */
struct local_call {
	struct fab_rpc_call c;
	struct fab_op *op;
	struct fab_part *part;
	uint32_t *left;
};

static void local_done(struct fab_rpc_call *c, int32_t status, uint32_t len)
{
	struct local_call *lc = (struct local_call *)c;
	struct fab_rpc_reply *rep = lc->op->rep;
	rep->status = status;
	rep->len = status >= 0 ? len : 0;
	if (status >= 0 && len)
		memcpy(rep->buf, c->resp, len);
	struct fab_part *p = lc->part;
	uint32_t left = --*lc->left;
	free(lc);
	if (left == 0)
		fab_part_done(p, 0);
}

void fab_set_aux(struct fab *f, const struct fab_aux *aux)
{
	f->aux = *aux;
}

void fab_track_writes(struct fab *f)
{
	f->track = true;
}

void fab_set_journal(struct fab *f, uint16_t node, const struct fab_journal *j)
{
	if (node >= FAB_MAX_NODES)
		return;
	f->peers[node].journaled = j != NULL;
	if (j)
		f->peers[node].journal = *j;
}

/* Apply one checked op to a region this CPU reaches; with j, note what it
 * left (j's lock held). */
static void apply_noted(struct fab_peer *p, struct fab_op *op, const struct fab_journal *j)
{
	if (!j || op->kind == FAB_READ) {
		(void)fab_apply_one(p->base, op);
		return;
	}
	uint64_t old = 0, *keep = op->old;
	op->old = &old;
	(void)fab_apply_one(p->base, op);
	if (op->kind == FAB_WRITE) {
		j->note(j->arg, op->off, op->buf, op->len);
	} else if (op->kind == FAB_CAS) {
		if (old == op->cmp)
			j->note(j->arg, op->off, &op->swp, 8);
	} else {
		uint64_t now = old + op->swp;
		j->note(j->arg, op->off, &now, 8);
	}
	op->old = keep;
	if (keep)
		*keep = old;
}

int fab_apply_request(struct fab *f, struct fab_op *const *ops, int n)
{
	struct fab_peer *self = &f->peers[f->cfg.self];
	if (!self->journaled)
		return fab_apply_local(self->base, self->size, ops, n);
	bool writes = false;
	for (int i = 0; i < n; i++) {
		const struct fab_op *op = ops[i];
		if (op->len == 0 || op->off > self->size || op->len > self->size - op->off)
			return -EFAULT;
		writes |= op->kind != FAB_READ;
	}
	const struct fab_journal *j = &self->journal;
	if (!writes)
		return fab_apply_local(self->base, self->size, ops, n);
	if (j->lock(j->arg) != 0)
		return -EHOSTDOWN;
	for (int i = 0; i < n; i++)
		apply_noted(self, ops[i], j);
	j->unlock(j->arg);
	return 0;
}

/* The journal that notes op (its node's), or NULL: a READ, a volatile op,
 * a node without one. */
static const struct fab_journal *journal_of(const struct fab_peer *p, const struct fab_op *op)
{
	return p->journaled && op->kind != FAB_READ && !(op->flags & FAB_OP_VOLATILE) ? &p->journal
										     : NULL;
}

/* What a batch's direct applies did, by node: ops applied, and ops a
 * journal refused (its node is down: nothing of them took effect). */
struct applied {
	uint64_t done, refused;
};

/* False when p's journal says its node is down (struct fab_journal, up):
 * then no op reaches it, READs and volatile ones included. */
static bool peer_up(const struct fab_peer *p)
{
	return !p->journaled || !p->journal.up || p->journal.up(p->journal.arg) == 0;
}

/* One op alone under its node's journal lock (a batch that also reaches
 * the network, or several journaled nodes). */
static void apply_direct(struct fab_peer *p, struct fab_op *op, struct applied *ap)
{
	const uint64_t bit = 1ull << (op->node & 63);
	const struct fab_journal *j = journal_of(p, op);
	if (ap->refused & bit)
		return; /* refused before (fab_exec's cut, or its journal) */
	if (!j && !peer_up(p)) {
		ap->refused |= bit;
		return;
	}
	if (j && j->lock(j->arg) != 0) {
		ap->refused |= bit;
		return;
	}
	apply_noted(p, op, j);
	if (j)
		j->unlock(j->arg);
	ap->done |= bit;
}

/*
 * A batch this CPU applies whole: when its journaled ops all go to one
 * node, one lock around all of it (struct fab_journal), in posting order.
 * Standalone nodes have one such node. A shm cluster's batch may reach
 * several journaled nodes (their logs' rings, storage/jring.c); then each
 * op takes its own node's lock alone: journals are never nested, so two
 * batches cannot wait for each other's locks. A journal that refuses its
 * lock (the node is down) leaves that node's ops unapplied.
 */
static void apply_batch(struct fab *f, struct fab_batch *b, int n, struct applied *ap)
{
	const struct fab_journal *one = NULL;
	bool several = false;
	for (int i = 0; i < n && !several; i++) {
		const struct fab_journal *j = journal_of(&f->peers[b->ops[i].node], &b->ops[i]);
		if (j && one && j != one)
			several = true;
		else if (j)
			one = j;
	}
	if (several) {
		for (int i = 0; i < n; i++)
			apply_direct(&f->peers[b->ops[i].node], &b->ops[i], ap);
		return;
	}
	/* Nodes that are down take nothing: their journal refuses its lock,
	 * or says so when asked (for READs and volatile ops, which take no
	 * lock). Asked once per node. */
	uint64_t down = ap->refused, asked = 0;
	for (int i = 0; i < n; i++) {
		uint16_t nd = b->ops[i].node;
		const uint64_t bit = 1ull << (nd & 63);
		if (!(asked & bit) && f->peers[nd].journaled) {
			asked |= bit;
			if (!peer_up(&f->peers[nd]))
				down |= bit;
		}
	}
	if (one) {
		uint16_t nd = FAB_MAX_NODES;
		for (int i = 0; i < n && nd == FAB_MAX_NODES; i++)
			if (journal_of(&f->peers[b->ops[i].node], &b->ops[i]))
				nd = b->ops[i].node;
		if ((down & (1ull << (nd & 63))) || one->lock(one->arg) != 0) {
			down |= 1ull << (nd & 63);
			one = NULL;
		}
	}
	for (int i = 0; i < n; i++) {
		struct fab_peer *p = &f->peers[b->ops[i].node];
		if (down & (1ull << (b->ops[i].node & 63))) {
			ap->refused |= 1ull << (b->ops[i].node & 63);
			continue;
		}
		const struct fab_journal *j = journal_of(p, &b->ops[i]);
		apply_noted(p, &b->ops[i], j && !(b->ops[i].flags & FAB_OP_UNJOURNALED) ? j : NULL);
		ap->done |= 1ull << (b->ops[i].node & 63);
	}
	if (one)
		one->unlock(one->arg);
}

/* A node whose journal refused ops failed the batch: -EHOSTDOWN, and
 * unsent when none of its ops took effect. */
static int refused(struct fab_batch *b, const struct applied *ap)
{
	if (!ap->refused)
		return 0;
	b->failed |= ap->refused;
	b->unsent |= ap->refused & ~ap->done;
	return -EHOSTDOWN;
}

struct fab_dirty *fab_worker_dirty(struct fab_worker *fw)
{
	return fw->dirty;
}

/* Note a changed range (fab_track_writes), merged with the last one when
 * they touch: an install's data then its ver word, a record then its
 * neighbour, make one range. */
static void note_dirty(struct fab_dirty *d, const struct fab_op *op)
{
	uint64_t lo = op->off, hi = op->off + op->len;
	if (d->overflow & (1ull << (op->node & 63)))
		return;
	if (d->n > 0) {
		struct fab_range *last = &d->r[d->n - 1];
		uint64_t llo = last->off, lhi = last->off + last->len;
		if (last->node == op->node && lo <= lhi && llo <= hi) {
			uint64_t nlo = lo < llo ? lo : llo, nhi = hi > lhi ? hi : lhi;
			if (nhi - nlo <= UINT32_MAX) {
				last->off = nlo;
				last->len = (uint32_t)(nhi - nlo);
				return;
			}
		}
	}
	if (d->n == FAB_DIRTY_MAX) {
		d->overflow |= 1ull << (op->node & 63);
		return;
	}
	d->r[d->n++] = (struct fab_range){ .node = op->node, .off = op->off, .len = op->len };
}

int fab_persist(struct fab *f, uint16_t node, uint64_t off, uint64_t len)
{
	if (node >= FAB_MAX_NODES || !f->peers[node].attached)
		return -EHOSTDOWN;
	const struct fab_peer *p = &f->peers[node];
	if (!p->direct || !p->base)
		return -ENOTSUP;
	if (len == 0)
		return 0;
	if (off > p->size || len > p->size - off)
		return -EFAULT;
	/* msync wants a page-aligned start; the mapping is page-aligned. */
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t a = off & ~(pg - 1);
	if (msync((char *)p->base + a, (size_t)(off + len - a), MS_SYNC) != 0)
		return -errno;
	return 0;
}

void fab_batch_init(struct fab_batch *b, struct fab_worker *fw, struct fab_waiter waiter,
		    struct fab_stats *stats)
{
	b->fw = fw;
	b->waiter = waiter;
	b->stats = stats;
	b->n = 0;
	b->pending = 0;
	b->err = 0;
	b->handle = NULL;
	b->tag = 0;
	b->twosided = 0;
}

static struct fab_op *queue(struct fab_batch *b)
{
	if (b->n == FAB_BATCH_MAX)
		(void)fab_exec(b); /* errors surface again on the caller's own exec */
	return &b->ops[b->n++];
}

/* The batch's tag on the op just queued, and FAB_OP_TWOSIDED if the tag
 * goes two-sided. */
static void stamp(struct fab_batch *b, struct fab_op *op, bool may_ship)
{
	op->tag = b->tag % FAB_TAGS;
	if (may_ship && (b->twosided >> op->tag) & 1u)
		op->flags |= FAB_OP_TWOSIDED;
}

void fab_read(struct fab_batch *b, uint16_t node, uint64_t off, void *buf, uint32_t len)
{
	struct fab_op *op = queue(b);
	*op = (struct fab_op){ .kind = FAB_READ, .node = node, .off = off, .buf = buf, .len = len };
	stamp(b, op, true);
}

void fab_flush(struct fab_batch *b, uint16_t node)
{
	struct fab_op *op = queue(b);
	*op = (struct fab_op){ .kind = FAB_READ, .flags = FAB_OP_FLUSH, .node = node, .off = 0,
			       .buf = &b->flush_sink, .len = 8 };
	stamp(b, op, false);
}

void fab_write(struct fab_batch *b, uint16_t node, uint64_t off, const void *buf, uint32_t len)
{
	struct fab_op *op = queue(b);
	*op = (struct fab_op){ .kind = FAB_WRITE, .node = node, .off = off, .buf = (void *)buf,
			       .len = len };
	stamp(b, op, true);
}

void fab_cas(struct fab_batch *b, uint16_t node, uint64_t off, uint64_t cmp, uint64_t swp,
	     uint64_t *old)
{
	struct fab_op *op = queue(b);
	*op = (struct fab_op){ .kind = FAB_CAS, .node = node, .off = off, .cmp = cmp, .swp = swp,
			       .old = old, .len = 8 };
	stamp(b, op, true);
}

void fab_rpc(struct fab_batch *b, uint16_t node, uint16_t handler, const void *req, uint32_t len,
	     struct fab_rpc_reply *rep)
{
	struct fab_op *op = queue(b);
	*op = (struct fab_op){ .kind = FAB_RPC, .node = node, .off = handler, .buf = (void *)req,
			       .len = len, .rep = rep };
	rep->len = 0;
	rep->status = -EINPROGRESS;
	stamp(b, op, false);
}

void fab_faa(struct fab_batch *b, uint16_t node, uint64_t off, uint64_t add, uint64_t *old)
{
	struct fab_op *op = queue(b);
	*op = (struct fab_op){ .kind = FAB_FAA, .node = node, .off = off, .swp = add, .old = old,
			       .len = 8 };
	stamp(b, op, true);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000ull, .tv_nsec = ns % 1000000000ull };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

void fab_part_done(struct fab_part *p, int err)
{
	struct fab_batch *b = p->b;
	if (err && !b->err)
		b->err = err;
	if (err) {
		b->failed |= 1ull << (p->node & 63);
		for (int i = 0; i < p->n; i++)
			if (p->ops[i]->kind == FAB_RPC && p->ops[i]->rep->status == -EINPROGRESS) {
				p->ops[i]->rep->status = err; /* not those that answered */
				p->ops[i]->rep->len = 0;
			}
	}
	if (--b->pending == 0 && b->handle && b->waiter.unpark)
		b->waiter.unpark(b->waiter.ctx, b->handle);
}

/* Without a coroutine to park: poll the backend, blocking in poll(2). */
static void wait_polling(struct fab_batch *b)
{
	struct fab_worker *fw = b->fw;
	while (b->pending) {
		if (fab_worker_poll(fw) > 0 || !b->pending)
			continue; /* progress, or parts failed by the poll */
		struct pollfd pfd[FAB_MAX_NODES];
		int fds[FAB_MAX_NODES];
		int k = fab_worker_fds(fw, fds, FAB_MAX_NODES);
		for (int i = 0; i < k; i++)
			pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		if (k > 0)
			poll(pfd, (nfds_t)k, 10);
		else
			sleep_ns(10000);
	}
}

#define PARTS_ON_STACK 4

/* The end of every exec: count the round trip, then its latency: a
 * software fabric injects it here, after the operations took effect, so
 * other coroutines run meanwhile. */
static int exec_done(struct fab_batch *b, struct fab *f, int rc)
{
	if (b->stats)
		b->stats->round_trips++;
	if (f->cfg.delay_us) {
		uint64_t ns = (uint64_t)f->cfg.delay_us * 1000ull;
		if (b->waiter.wait)
			b->waiter.wait(b->waiter.ctx, ns);
		else
			sleep_ns(ns);
		if (b->waiter.waited)
			b->waiter.waited(b->waiter.ctx, ns); /* the round trip it stands for */
	}
	return rc;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait until every part posted for the exec in progress completed. */
static void wait_parts(struct fab_batch *b)
{
	uint64_t t0 = b->waiter.waited ? mono_ns() : 0;
	if (b->waiter.park) {
		while (b->pending)
			b->waiter.park(b->waiter.ctx);
	} else {
		wait_polling(b);
	}
	b->handle = NULL;
	if (b->waiter.waited)
		b->waiter.waited(b->waiter.ctx, mono_ns() - t0);
}

/* Queue a part of RPCs to the own node on this worker's inbox: they run at
 * its next poll (fab_worker_poll), and the part completes with the last. */
static int post_local(struct fab_worker *fw, struct fab_part *part)
{
	part->resp_len = (uint32_t)part->n; /* calls left */
	for (int i = 0; i < part->n; i++) {
		struct fab_op *op = part->ops[i];
		struct local_call *lc = malloc(sizeof(*lc) + op->rep->cap);
		if (!lc) {
			/* the calls queued so far complete it; this one fails it */
			op->rep->status = -ENOMEM;
			if (--part->resp_len == 0)
				fab_part_done(part, 0);
			continue;
		}
		*lc = (struct local_call){ .op = op, .part = part, .left = &part->resp_len };
		lc->c = (struct fab_rpc_call){ .fw = fw, .from = fw->f->cfg.self, .to = fw->f->cfg.self,
					       .handler = (uint16_t)op->off, .len = op->len,
					       .cap = op->rep->cap, .req = op->buf, .resp = lc + 1,
					       .done = local_done };
		fab_worker_inbox_push(fw, &lc->c);
	}
	return 0;
}

/*
 * A batch with RPCs, in phases (fab_rpc's ordering rule): phase k takes,
 * per node, its ops from where phase k-1 stopped through its next run of
 * consecutive RPCs, so an op posted after an RPC waits for its reply. Each
 * phase but the last counts as a round trip here (the caller's exec_done
 * counts the last).
 */
static int exec_phased(struct fab_batch *b, int n, uint64_t cut, struct applied *ap)
{
	struct fab_worker *fw = b->fw;
	struct fab *f = fw->f;
	uint8_t phase[FAB_BATCH_MAX];
	uint8_t node_phase[FAB_MAX_NODES] = { 0 };
	uint64_t in_rpc = 0;
	int nphases = 1, rc = 0;
	for (int i = 0; i < n; i++) {
		struct fab_op *op = &b->ops[i];
		const uint64_t bit = 1ull << op->node;
		if (op->kind == FAB_RPC) {
			in_rpc |= bit;
			if (cut & bit) {
				op->rep->status = -EHOSTDOWN;
				op->rep->len = 0;
			}
		} else if (in_rpc & bit) {
			node_phase[op->node]++;
			in_rpc &= ~bit;
		}
		phase[i] = node_phase[op->node];
		if (phase[i] + 1 > nphases)
			nphases = phase[i] + 1;
	}
	struct fab_part *parts = malloc(sizeof(*parts) * (size_t)n);
	if (!parts)
		return -ENOMEM;
	uint64_t reached = 0; /* nodes an earlier phase posted to */
	for (int ph = 0; ph < nphases; ph++) {
		int np = 0;
		b->pending = 0;
		b->err = 0;
		b->handle = NULL;
		/* A node whose part failed gets nothing more: its RPC may still
		 * run there, and what follows it must not overtake it. */
		const uint64_t skip = cut | b->failed;
		for (int i = 0; i < n; i++) {
			struct fab_op *op = &b->ops[i];
			struct fab_peer *p = &f->peers[op->node];
			if (phase[i] != ph)
				continue;
			if (skip & (1ull << op->node)) {
				if (op->kind == FAB_RPC && op->rep->status == -EINPROGRESS) {
					op->rep->status = -EHOSTDOWN;
					op->rep->len = 0;
				}
				continue;
			}
			if (p->direct && op->kind != FAB_RPC) {
				apply_direct(p, op, ap); /* checked by fab_exec */
				continue;
			}
			int j;
			for (j = 0; j < np && parts[j].node != op->node; j++)
				;
			if (j == np)
				parts[np++] = (struct fab_part){ .b = b, .node = op->node };
			parts[j].ops[parts[j].n++] = op;
		}
		if (np) {
			if (b->waiter.park)
				b->handle = b->waiter.self(b->waiter.ctx);
			for (int j = 0; j < np; j++) {
				const struct fab_peer *p = &f->peers[parts[j].node];
				b->pending++;
				int r;
				if (parts[j].node == f->cfg.self && p->direct)
					r = post_local(fw, &parts[j]);
				else if (p->direct)
					r = f->be->post_rpc ? f->be->post_rpc(fw, &parts[j]) : -EOPNOTSUPP;
				else if (f->be->rpc_in_post || parts[j].ops[parts[j].n - 1]->kind != FAB_RPC)
					r = f->be->post(fw, &parts[j]);
				else
					r = -EOPNOTSUPP;
				if (r) { /* not queued: complete it here */
					b->unsent |= 1ull << (parts[j].node & 63);
					fab_part_done(&parts[j], r);
				} else {
					reached |= 1ull << (parts[j].node & 63);
				}
			}
			wait_parts(b);
			if (b->err && !rc)
				rc = b->err;
		}
		if (ph + 1 < nphases)
			(void)exec_done(b, f, 0);
	}
	b->unsent &= ~reached; /* unsent: nothing of it ever left */
	free(parts);
	return rc;
}

static int exec_batch(struct fab_batch *b)
{
	int n = b->n;
	b->n = 0;
	b->execs++;
	b->failed = 0;
	b->unsent = 0;
	struct fab *f = b->fw->f;
	bool all_direct = true, rpcs = false, ship = false;
	const bool lapsed = f->lease && lease_lapsed(f);
	/* Nodes this batch must not reach (not attached, fenced, or our lease
	 * ran out): their ops are refused, the others' go ahead, so the
	 * caller's view (b->failed) is exact per node. */
	uint64_t cut = 0;
	for (int i = 0; i < n; i++) {
		struct fab_op *op = &b->ops[i];
		if (op->node >= FAB_MAX_NODES) {
			b->failed |= 1ull << (op->node & 63);
			b->unsent = b->failed; /* nothing was posted */
			return -EHOSTDOWN;
		}
		if (!f->peers[op->node].attached || ck_pr_load_8(&f->peers[op->node].fenced) ||
		    (lapsed && op->node != f->cfg.self)) {
			cut |= 1ull << op->node;
			if (op->kind == FAB_RPC && op->rep) { /* refused: say so, even if nothing else runs */
				op->rep->status = -EHOSTDOWN;
				op->rep->len = 0;
			}
			continue;
		}
		if (op->kind == FAB_RPC) {
			if (op->off >= FAB_RPC_HANDLERS || op->len > FAB_RPC_MAX || !op->rep ||
			    op->rep->cap > FAB_RPC_MAX || (op->len && !op->buf))
				return -EINVAL;
			rpcs = true;
			continue;
		}
		/* Not off + len > size: that sum wraps for off near 2^64 and let
		 * such an op reach memory before the region. */
		uint64_t size = f->peers[op->node].size;
		if (op->len == 0 || op->off > size || op->len > size - op->off)
			return -EFAULT;
		if ((op->kind == FAB_CAS || op->kind == FAB_FAA) && (op->off & 7))
			return -EINVAL;
		if (op->kind > FAB_FAA)
			return -EINVAL;
		all_direct &= f->peers[op->node].direct;
		ship |= (op->flags & FAB_OP_TWOSIDED) != 0;
	}
	/* The initiator notes what two-sided ops change too: it persists
	 * what it wrote, whoever applied it (cc/durable.c). */
	if (b->fw->dirty)
		for (int i = 0; i < n; i++)
			if (b->ops[i].kind != FAB_READ && b->ops[i].kind != FAB_RPC &&
			    !(b->ops[i].flags & FAB_OP_VOLATILE))
				note_dirty(b->fw->dirty, &b->ops[i]);
	struct fab_ship *shipped = NULL;
	if (ship) {
		n = fab_ship_prepare(b, n, &shipped);
		if (n < 0)
			return n;
		rpcs |= shipped != NULL;
	}
	if (b->stats) {
		for (int i = 0; i < n; i++) {
			b->stats->verbs[b->ops[i].kind]++;
			if (b->ops[i].kind == FAB_READ || b->ops[i].kind == FAB_WRITE)
				b->stats->bytes[b->ops[i].kind] += b->ops[i].len;
			if (b->ops[i].kind != FAB_RPC)
				b->stats->tag_verbs[b->ops[i].tag % FAB_TAGS]++;
			else if (b->ops[i].off != FAB_RPC_OPS)
				b->stats->tag_rpcs[b->ops[i].tag % FAB_TAGS]++;
		}
		if (shipped)
			fab_ship_count(shipped, b->stats);
	}

	/* Every op on CPU-reachable regions (a shm node, the own node): applied
	 * here in posting order, checked above. */
	struct applied ap = { 0, cut };
	if (rpcs) {
		int rc = exec_phased(b, n, cut, &ap);
		int rrc = refused(b, &ap);
		int src = shipped ? fab_ship_finish(b, shipped) : 0;
		return exec_done(b, f, rc ? rc : rrc ? rrc : src);
	}
	if (all_direct) {
		apply_batch(f, b, n, &ap);
		return exec_done(b, f, refused(b, &ap));
	}

	/* Split by target node, keeping each node's ops in posting order.
	 * Ops on CPU-reachable regions are applied here; the rest go to the
	 * backend, one doorbell batch per node, all in flight together. */
	struct fab_part stack_parts[PARTS_ON_STACK];
	struct fab_part *parts = stack_parts;
	int nparts = 0, cap = PARTS_ON_STACK;
	b->pending = 0;
	b->err = 0;
	b->handle = NULL;
	int rc = 0;
	for (int i = 0; i < n; i++) {
		struct fab_op *op = &b->ops[i];
		struct fab_peer *p = &f->peers[op->node];
		if (cut & (1ull << op->node))
			continue;
		if (p->direct) {
			apply_direct(p, op, &ap); /* checked above */
			continue;
		}
		int j;
		for (j = 0; j < nparts && parts[j].node != op->node; j++)
			;
		if (j == nparts) {
			if (nparts == cap) {
				struct fab_part *np = malloc(sizeof(*np) * (size_t)cap * 2);
				if (!np)
					return -ENOMEM;
				memcpy(np, parts, sizeof(*np) * (size_t)nparts);
				if (parts != stack_parts)
					free(parts);
				parts = np;
				cap *= 2;
			}
			parts[j].b = b;
			parts[j].node = op->node;
			parts[j].n = 0;
			parts[j].next = NULL;
			nparts++;
		}
		parts[j].ops[parts[j].n++] = op;
	}
	if (nparts) {
		if (b->waiter.park)
			b->handle = b->waiter.self(b->waiter.ctx);
		for (int j = 0; j < nparts; j++) {
			b->pending++;
			int r = f->be->post(b->fw, &parts[j]);
			if (r) { /* not queued: complete it here */
				b->unsent |= 1ull << (parts[j].node & 63);
				fab_part_done(&parts[j], r);
			}
		}
		wait_parts(b);
		if (b->err && !rc)
			rc = b->err;
		if (parts != stack_parts)
			free(parts);
	}
	int rrc = refused(b, &ap);
	return exec_done(b, f, rc ? rc : rrc);
}


int fab_exec(struct fab_batch *b)
{
	if (b->n == 0)
		return 0;
	if (!b->stats)
		return exec_batch(b);
	const uint8_t tag = b->ops[0].tag % FAB_TAGS;
	const uint64_t t0 = mono_ns();
	int rc = exec_batch(b);
	b->stats->tag_ns[tag] += mono_ns() - t0;
	return rc;
}

int fab_read1(struct fab_batch *b, uint16_t node, uint64_t off, void *buf, uint32_t len)
{
	fab_read(b, node, off, buf, len);
	return fab_exec(b);
}

int fab_write1(struct fab_batch *b, uint16_t node, uint64_t off, const void *buf, uint32_t len)
{
	fab_write(b, node, off, buf, len);
	return fab_exec(b);
}

int fab_cas1(struct fab_batch *b, uint16_t node, uint64_t off, uint64_t cmp, uint64_t swp,
	     uint64_t *old)
{
	fab_cas(b, node, off, cmp, swp, old);
	return fab_exec(b);
}

int fab_faa1(struct fab_batch *b, uint16_t node, uint64_t off, uint64_t add, uint64_t *old)
{
	fab_faa(b, node, off, add, old);
	return fab_exec(b);
}

void fab_stats_add(struct fab_stats *dst, const struct fab_stats *src)
{
	for (int k = 0; k < FAB_KINDS; k++)
		dst->verbs[k] += src->verbs[k];
	dst->round_trips += src->round_trips;
	dst->bytes[0] += src->bytes[0];
	dst->bytes[1] += src->bytes[1];
	for (int k = 0; k < FAB_TAGS; k++) {
		dst->tag_verbs[k] += src->tag_verbs[k];
		dst->tag_rpcs[k] += src->tag_rpcs[k];
		dst->tag_ns[k] += src->tag_ns[k];
	}
}
