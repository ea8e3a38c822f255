/*
 * fabric.c: `rckv-bench fabric`, the fabric microbenchmark (see fabric.h).
 *
 * Two nodes live in this process: node 1 owns a 1 MiB region (a shared file
 * in /dev/shm, so that shm can map it by path), node 2 is the initiator with
 * one worker whose batch polls (no coroutines: the calling thread blocks in
 * fab_exec's poll, as a control thread would). On tcp node 1 runs the NIC
 * thread, fed by a fabric listener on loopback (rdma/listen.h), the one
 * server/cluster.c runs.
 *
 * Each cell of the table runs N operations after N/10 of warm-up and
 * reports wall time / N. Operations rotate over 64 targets a cache line
 * apart (1 KiB apart for READ 1 KiB) so that a batch does not hit one line
 * B times. CAS always succeeds (it installs expected + 1 on its own word),
 * as a lock acquisition does; the words are checked at the end.
 * No fabric-delay-us is injected: these are the software fabric's own costs.
 *
 * The last row is the FAA again, by RPC (fab_rpc): node 1's worker, on a
 * thread of its own here, runs a handler that does it on its own region,
 * as an RPC stage would; the row against FAA's is one-sided against
 * two-sided for the same work (RCC 3.3).
 */
#include "bench/fabric.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "rdma/fab.h"
#include "rdma/listen.h"

#define BF_REGION (1u << 20)
#define BF_TARGETS 64
#define BF_SMALL_STRIDE 64u  /* bytes between targets: one cache line */
#define BF_LARGE_STRIDE 1024u
#define BF_WORDS_OFF (BF_TARGETS * BF_LARGE_STRIDE) /* CAS/FAA words after the 1 KiB slots */

enum bf_op { BF_READ64, BF_READ1K, BF_CAS, BF_FAA, BF_RPC_FAA, BF_OPS };
static const char *const bf_op_names[BF_OPS] = { "READ 64 B", "READ 1 KiB", "CAS", "FAA",
						 "RPC FAA" };
#define BF_RPC_ID 1 /* the handler */

struct bf_node {
	struct fab *f;
	void *base;
	uint64_t size;
	char path[256]; /* region file (node 1) */
	struct fab_listener *l; /* tcp: node 1's fabric listener, or NULL */
};

struct bf_run {
	struct fab_worker *fw;
	struct fab_batch b;
	uint64_t cas_expect[BF_TARGETS]; /* value each CAS word holds */
	uint64_t faa_sum[BF_TARGETS];    /* what FAA added to each word */
	char rbuf[FAB_BATCH_MAX][BF_LARGE_STRIDE];
	uint64_t olds[FAB_BATCH_MAX];
	uint64_t rpc_off[FAB_BATCH_MAX];
	struct fab_rpc_reply reps[FAB_BATCH_MAX];
};

/* RPC FAA's handler, on node 1's worker: the FAA, on its own region. */
static int bf_rpc_faa(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)arg;
	uint64_t off, old = 0;
	if (c->len != 8 || c->cap < 8)
		return -EINVAL;
	memcpy(&off, c->req, 8);
	struct fab_batch b;
	fab_batch_init(&b, c->fw, (struct fab_waiter){ 0 }, NULL);
	int rc = fab_faa1(&b, c->to, off, 1, &old);
	if (rc)
		return rc;
	memcpy(c->resp, &old, 8);
	*len = 8;
	return 0;
}

/* Node 1's worker: runs the RPCs it gets, polling as a server's does. */
struct bf_server {
	struct fab *f;
	struct fab_worker *fw;
	int ready, stop;
	pthread_t th;
};

static void *bf_server_main(void *arg)
{
	struct bf_server *sv = arg;
	sv->fw = fab_worker_create(sv->f, 0);
	__atomic_store_n(&sv->ready, sv->fw ? 1 : -1, __ATOMIC_RELEASE);
	while (sv->fw && !__atomic_load_n(&sv->stop, __ATOMIC_ACQUIRE)) {
		int fds[FAB_MAX_NODES];
		struct pollfd pfd[FAB_MAX_NODES];
		int k = fab_worker_fds(sv->fw, fds, FAB_MAX_NODES);
		for (int i = 0; i < k; i++)
			pfd[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		poll(pfd, (nfds_t)k, 10);
		fab_worker_poll(sv->fw);
	}
	fab_worker_destroy(sv->fw);
	return NULL;
}

static uint64_t bf_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void bf_node_down(struct bf_node *n, bool file)
{
	fab_listener_stop(n->l);
	n->l = NULL;
	if (n->f)
		fab_close(n->f);
	if (n->base && n->base != MAP_FAILED)
		munmap(n->base, n->size);
	if (file && n->path[0])
		unlink(n->path);
}

/* Node `id` on a fresh region: a shared file for node 1, anonymous else. */
static int bf_node_up(struct bf_node *n, const char *be, uint16_t id, bool file, char *err,
		      size_t errlen)
{
	memset(n, 0, sizeof(*n));
	n->size = BF_REGION;
	int fd = -1;
	if (file) {
		snprintf(n->path, sizeof(n->path), "/dev/shm/rckv-bench-fabric-%d-XXXXXX",
			 (int)getpid());
		fd = mkstemp(n->path);
		if (fd < 0 || ftruncate(fd, (off_t)n->size) != 0) {
			snprintf(err, errlen, "region file in /dev/shm: %s", strerror(errno));
			if (fd < 0)
				n->path[0] = '\0';
			goto fail;
		}
	}
	n->base = mmap(NULL, n->size, PROT_READ | PROT_WRITE,
		       file ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS, fd, 0);
	if (fd >= 0)
		close(fd);
	if (n->base == MAP_FAILED) {
		snprintf(err, errlen, "mmap: %s", strerror(errno));
		goto fail;
	}
	struct fab_config fc = { .backend = be, .self = id, .region_path = n->path };
	if (fab_open(&fc, &n->f, err, errlen) != 0)
		goto fail;
	if (fab_attach_err(n->f, id, n->base, n->size, err, errlen) != 0)
		goto fail;
	struct fab_listener_config lc = { .fd = -1, .fab = n->f };
	if (strcmp(be, "tcp") == 0 && fab_listener_start(&lc, &n->l, err, errlen) != 0)
		goto fail;
	return 0;
fail:
	bf_node_down(n, file);
	return -1;
}

/* Queue op number i of kind k. */
static void bf_queue(struct bf_run *r, enum bf_op k, uint64_t i, int slot)
{
	unsigned t = (unsigned)(i % BF_TARGETS);
	switch (k) {
	case BF_READ64:
		fab_read(&r->b, 1, (uint64_t)t * BF_SMALL_STRIDE, r->rbuf[slot], 64);
		break;
	case BF_READ1K:
		fab_read(&r->b, 1, (uint64_t)t * BF_LARGE_STRIDE, r->rbuf[slot], BF_LARGE_STRIDE);
		break;
	case BF_CAS:
		fab_cas(&r->b, 1, BF_WORDS_OFF + (uint64_t)t * BF_SMALL_STRIDE, r->cas_expect[t],
			r->cas_expect[t] + 1, &r->olds[slot]);
		r->cas_expect[t]++;
		break;
	case BF_FAA:
		fab_faa(&r->b, 1, BF_WORDS_OFF + BF_TARGETS * BF_SMALL_STRIDE +
					  (uint64_t)t * BF_SMALL_STRIDE,
			1, &r->olds[slot]);
		r->faa_sum[t]++;
		break;
	case BF_RPC_FAA:
		r->rpc_off[slot] = BF_WORDS_OFF + BF_TARGETS * BF_SMALL_STRIDE +
				   (uint64_t)t * BF_SMALL_STRIDE;
		r->reps[slot] = (struct fab_rpc_reply){ .buf = &r->olds[slot], .cap = 8 };
		fab_rpc(&r->b, 1, BF_RPC_ID, &r->rpc_off[slot], 8, &r->reps[slot]);
		r->faa_sum[t]++;
		break;
	default:
		break;
	}
}

/* Run n ops of kind k, `batch` per fab_exec; returns ns per op, or -1. */
static double bf_cell(struct bf_run *r, enum bf_op k, uint64_t n, int batch)
{
	uint64_t t0 = bf_now_ns();
	uint64_t i = 0;
	while (i < n) {
		int m = 0;
		for (; m < batch && i < n; m++, i++)
			bf_queue(r, k, i, m);
		int rc = fab_exec(&r->b);
		for (int j = 0; k == BF_RPC_FAA && j < m && rc == 0; j++)
			rc = r->reps[j].status < 0 ? r->reps[j].status : 0;
		if (rc) {
			fprintf(stderr, "rckv-bench fabric: %s failed: %s\n", bf_op_names[k],
				strerror(-rc));
			return -1;
		}
	}
	return (double)(bf_now_ns() - t0) / (double)n;
}

/* The CAS and FAA words hold what the run put there (every CAS won). */
static int bf_verify(struct bf_run *r)
{
	for (unsigned t = 0; t < BF_TARGETS; t++) {
		uint64_t c = 0, a = 0;
		fab_read(&r->b, 1, BF_WORDS_OFF + (uint64_t)t * BF_SMALL_STRIDE, &c, 8);
		fab_read(&r->b, 1, BF_WORDS_OFF + BF_TARGETS * BF_SMALL_STRIDE +
					   (uint64_t)t * BF_SMALL_STRIDE,
			 &a, 8);
		if (fab_exec(&r->b) != 0 || c != r->cas_expect[t] || a != r->faa_sum[t]) {
			fprintf(stderr, "rckv-bench fabric: word %u holds CAS %llu / FAA %llu, "
					"expected %llu / %llu\n",
				t, (unsigned long long)c, (unsigned long long)a,
				(unsigned long long)r->cas_expect[t],
				(unsigned long long)r->faa_sum[t]);
			return -1;
		}
	}
	return 0;
}

static int bf_backend(const char *be, uint64_t n, int batch)
{
	char err[256] = "";
	struct bf_node target, init;
	struct bf_run *r = NULL;
	int status = 1;
	if (bf_node_up(&target, be, 1, true, err, sizeof(err)) != 0) {
		fprintf(stderr, "rckv-bench fabric: %s node 1: %s\n", be, err);
		return 1;
	}
	if (fab_rpc_register(target.f, BF_RPC_ID, "faa", bf_rpc_faa, NULL) != 0) {
		fprintf(stderr, "rckv-bench fabric: %s: cannot register the RPC\n", be);
		goto out_target;
	}
	struct bf_server sv = { .f = target.f };
	if (pthread_create(&sv.th, NULL, bf_server_main, &sv) != 0)
		goto out_target;
	while (!__atomic_load_n(&sv.ready, __ATOMIC_ACQUIRE))
		usleep(1000);
	if (bf_node_up(&init, be, 2, true, err, sizeof(err)) != 0) {
		fprintf(stderr, "rckv-bench fabric: %s node 2: %s\n", be, err);
		goto out_server;
	}
	struct fab_peer_info pi = { .node = 1, .region_size = target.size };
	snprintf(pi.region_path, sizeof(pi.region_path), "%s", target.path);
	if (target.l)
		snprintf(pi.addr, sizeof(pi.addr), "%s", fab_listener_addr(target.l));
	if (fab_attach_peer(init.f, &pi, err, sizeof(err)) != 0) {
		fprintf(stderr, "rckv-bench fabric: %s attach: %s\n", be, err);
		goto out_init;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		goto out_init;
	r->fw = fab_worker_create_err(init.f, 0, err, sizeof(err));
	if (!r->fw) {
		fprintf(stderr, "rckv-bench fabric: %s worker: %s\n", be, err);
		goto out_run;
	}
	fab_batch_init(&r->b, r->fw, (struct fab_waiter){ 0 }, NULL);

	uint64_t warm = n / 10 ? n / 10 : 1;
	for (int k = 0; k < BF_OPS; k++) {
		double one, many;
		if (bf_cell(r, (enum bf_op)k, warm, batch) < 0 ||
		    (one = bf_cell(r, (enum bf_op)k, n, 1)) < 0 ||
		    (many = bf_cell(r, (enum bf_op)k, n, batch)) < 0)
			goto out_worker;
		printf("%-7s  %-10s  %14.1f  %14.1f  %8.1fx\n", be, bf_op_names[k], one, many,
		       many > 0 ? one / many : 0.0);
		fflush(stdout);
	}
	status = bf_verify(r) ? 1 : 0;
out_worker:
	fab_worker_destroy(r->fw);
out_run:
	free(r);
out_init:
	bf_node_down(&init, true);
out_server:
	__atomic_store_n(&sv.stop, 1, __ATOMIC_RELEASE);
	pthread_join(sv.th, NULL);
out_target:
	bf_node_down(&target, true);
	return status;
}

static void bf_usage(FILE *f)
{
	fprintf(f, "usage: rckv-bench fabric [--backend shm|tcp] [--ops N] [--batch B]\n"
		   "  ns per one-sided op (READ 64 B, READ 1 KiB, CAS, FAA) between two nodes\n"
		   "  in this process, and per RPC that does the FAA on the target's worker;\n"
		   "  unbatched (1 op per fab_exec) and B per fab_exec.\n"
		   "  --backend  one backend (default: shm, then tcp)\n"
		   "  --ops      ops per cell (default: 1000000 on shm, 20000 on tcp)\n"
		   "  --batch    ops per fab_exec in the batched column, 1..%d (default 16)\n",
		FAB_BATCH_MAX);
}

int bench_fabric_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "ops", required_argument, NULL, 'n' },
		{ "batch", required_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *only = NULL;
	long long ops = 0;
	long batch = 16;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end = NULL;
		switch (c) {
		case 'b':
			only = optarg;
			if (strcmp(only, "shm") != 0 && strcmp(only, "tcp") != 0) {
				fprintf(stderr, "rckv-bench fabric: --backend is shm or tcp\n");
				return 2;
			}
			break;
		case 'n':
			ops = strtoll(optarg, &end, 10);
			if (!end || *end || ops < 1) {
				fprintf(stderr, "rckv-bench fabric: --ops wants a positive count\n");
				return 2;
			}
			break;
		case 'B':
			batch = strtol(optarg, &end, 10);
			if (!end || *end || batch < 1 || batch > FAB_BATCH_MAX) {
				fprintf(stderr, "rckv-bench fabric: --batch is 1..%d\n", FAB_BATCH_MAX);
				return 2;
			}
			break;
		case 'h':
			bf_usage(stdout);
			return 0;
		default:
			bf_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		bf_usage(stderr);
		return 2;
	}

	printf("fabric microbenchmark: 2 nodes in one process, no injected delay; ns/op = wall "
	       "time / ops\n");
	char bcol[32];
	snprintf(bcol, sizeof(bcol), "%ld per exec", batch);
	printf("%-7s  %-10s  %14s  %14s  %9s\n", "backend", "op", "1 per exec", bcol, "");
	printf("%-7s  %-10s  %14s  %14s  %9s\n", "", "", "ns/op", "ns/op", "speedup");
	static const char *const backends[] = { "shm", "tcp" };
	int status = 0;
	for (int i = 0; i < 2; i++) {
		if (only && strcmp(only, backends[i]) != 0)
			continue;
		uint64_t n = ops ? (uint64_t)ops : (i == 0 ? 1000000u : 20000u);
		int rc = bf_backend(backends[i], n, (int)batch);
		if (rc)
			status = rc;
	}
	return status;
}
