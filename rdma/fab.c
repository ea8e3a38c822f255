/*
 * fab.c: the backend-independent half of the fabric: backend registry,
 * batches, counters and latency injection. See fab.h for the contract.
 */
#include "rdma/fab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdma/fab_internal.h"

static const struct fab_backend *const backends[] = {
	&fab_shm_backend,
};

int fab_open(const struct fab_config *cfg, struct fab **out, char *err, size_t errlen)
{
	const struct fab_backend *be = NULL;
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (strcmp(backends[i]->name, cfg->backend) == 0)
			be = backends[i];
	if (!be) {
		snprintf(err, errlen, "unknown fabric backend '%s'", cfg->backend);
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
	f->be = be;
	*out = f;
	return 0;
}

void fab_close(struct fab *f)
{
	free(f);
}

int fab_attach(struct fab *f, uint16_t node, void *base, uint64_t size)
{
	if (node >= FAB_MAX_NODES)
		return -EINVAL;
	f->peers[node].base = base;
	f->peers[node].size = size;
	return 0;
}

uint16_t fab_self(const struct fab *f) { return f->cfg.self; }

void *fab_local_base(const struct fab *f, uint16_t node)
{
	return node < FAB_MAX_NODES ? f->peers[node].base : NULL;
}

uint64_t fab_region_size(const struct fab *f, uint16_t node)
{
	return node < FAB_MAX_NODES ? f->peers[node].size : 0;
}

struct fab_worker *fab_worker_create(struct fab *f, int worker_id)
{
	struct fab_worker *fw = calloc(1, sizeof(*fw));
	if (fw) {
		fw->f = f;
		fw->id = worker_id;
	}
	return fw;
}

void fab_worker_destroy(struct fab_worker *fw) { free(fw); }

void fab_batch_init(struct fab_batch *b, struct fab_worker *fw, struct fab_waiter waiter,
		    struct fab_stats *stats)
{
	b->fw = fw;
	b->waiter = waiter;
	b->stats = stats;
	b->n = 0;
}

static struct fab_op *queue(struct fab_batch *b)
{
	if (b->n == FAB_BATCH_MAX)
		(void)fab_exec(b); /* errors surface again on the caller's own exec */
	return &b->ops[b->n++];
}

void fab_read(struct fab_batch *b, uint16_t node, uint64_t off, void *buf, uint32_t len)
{
	struct fab_op *op = queue(b);
	*op = (struct fab_op){ .kind = FAB_READ, .node = node, .off = off, .buf = buf, .len = len };
}

void fab_write(struct fab_batch *b, uint16_t node, uint64_t off, const void *buf, uint32_t len)
{
	struct fab_op *op = queue(b);
	*op = (struct fab_op){ .kind = FAB_WRITE, .node = node, .off = off, .buf = (void *)buf,
			       .len = len };
}

void fab_cas(struct fab_batch *b, uint16_t node, uint64_t off, uint64_t cmp, uint64_t swp,
	     uint64_t *old)
{
	struct fab_op *op = queue(b);
	*op = (struct fab_op){ .kind = FAB_CAS, .node = node, .off = off, .cmp = cmp, .swp = swp,
			       .old = old, .len = 8 };
}

void fab_faa(struct fab_batch *b, uint16_t node, uint64_t off, uint64_t add, uint64_t *old)
{
	struct fab_op *op = queue(b);
	*op = (struct fab_op){ .kind = FAB_FAA, .node = node, .off = off, .swp = add, .old = old,
			       .len = 8 };
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000ull, .tv_nsec = ns % 1000000000ull };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

int fab_exec(struct fab_batch *b)
{
	int n = b->n;
	if (n == 0)
		return 0;
	b->n = 0;
	struct fab *f = b->fw->f;
	for (int i = 0; i < n; i++) {
		struct fab_op *op = &b->ops[i];
		if (op->node >= FAB_MAX_NODES || !f->peers[op->node].size)
			return -EHOSTDOWN;
		if (op->off + op->len > f->peers[op->node].size || op->len == 0)
			return -EFAULT;
		if ((op->kind == FAB_CAS || op->kind == FAB_FAA) && (op->off & 7))
			return -EINVAL;
		if (b->stats)
			b->stats->verbs[op->kind]++;
	}
	int rc = f->be->exec(b->fw, b->ops, n);
	if (b->stats)
		b->stats->round_trips++;
	/* The round trip's latency: a software fabric injects it here, after
	 * the operations took effect, so other coroutines run meanwhile. */
	if (f->cfg.delay_us) {
		uint64_t ns = (uint64_t)f->cfg.delay_us * 1000ull;
		if (b->waiter.wait)
			b->waiter.wait(b->waiter.ctx, ns);
		else
			sleep_ns(ns);
	}
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
}
