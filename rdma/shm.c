/*
 * shm.c: the shared-memory fabric backend. Every region is a shared file
 * mapping; a one-sided operation is a copy or an atomic done by the
 * caller's CPU on the target's memory, which is what an RDMA NIC does on
 * the target's behalf. The target's transaction code never runs.
 *
 * Word atomicity (fab.h): READ and WRITE move whole 8-byte words with
 * relaxed atomic loads and stores where the range is aligned, so a racing
 * reader sees each word either old or new, never half of one. CAS and FAA
 * are sequentially consistent GCC atomics (lock cmpxchg / lock xadd).
 * Ordering per endpoint: ops run in posting order on the caller's thread.
 * Two-sided RPC goes through rings in shared memory (shm_rpc.c).
 */
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdbool.h>
#include <string.h>

#include "rdma/fab_apply.h"
#include "rdma/fab_internal.h"
#include "rdma/shm_rpc.h"

int fab_apply_local(char *base, uint64_t size, struct fab_op *const *ops, int n)
{
	for (int i = 0; i < n; i++) {
		struct fab_op *op = ops[i];
		/* Written so that off + len cannot wrap past 2^64: the tcp NIC
		 * applies peers' requests here, and a wrapped sum would let one
		 * read or write memory before the region. */
		if (op->len == 0 || op->off > size || op->len > size - op->off)
			return -EFAULT;
		int rc = fab_apply_one(base, op);
		if (rc)
			return rc;
	}
	return 0;
}

/* shm: a peer's region is its file, mapped shared here too. */
static int shm_attach_peer(struct fab *f, const struct fab_peer_info *pi, char *err,
			   size_t errlen)
{
	struct fab_peer *p = &f->peers[pi->node];
	int fd = open(pi->region_path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "shm fabric: can't open node %u's region %s: %s (shm needs "
			 "every node on this host)", pi->node, pi->region_path, strerror(errno));
		return -errno;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < pi->region_size) {
		snprintf(err, errlen, "shm fabric: node %u's region %s is smaller than announced",
			 pi->node, pi->region_path);
		close(fd);
		return -EINVAL;
	}
	void *base = mmap(NULL, pi->region_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		snprintf(err, errlen, "shm fabric: mmap of node %u's region: %s", pi->node,
			 strerror(errno));
		return -errno;
	}
	if (p->mapped && p->base)
		munmap(p->base, p->size);
	p->base = base;
	p->size = pi->region_size;
	p->mapped = true;
	p->direct = true;
	shm_rpc_attach_peer(f, pi);
	return 0;
}

static void shm_close(struct fab *f)
{
	shm_rpc_close(f);
	for (int i = 0; i < FAB_MAX_NODES; i++) {
		struct fab_peer *p = &f->peers[i];
		if (p->mapped && p->base)
			munmap(p->base, p->size);
		p->mapped = false;
	}
}

/* Every shm node is direct, so fab_exec never posts; this is for callers
 * that post explicitly. */
static int shm_post(struct fab_worker *fw, struct fab_part *part)
{
	struct fab_peer *p = &fw->f->peers[part->node];
	if (!p->base)
		return -EHOSTDOWN;
	int rc = fab_apply_local(p->base, p->size, part->ops, part->n);
	fab_part_done(part, rc);
	return 0;
}

const struct fab_backend fab_shm_backend = {
	.name = "shm",
	.close = shm_close,
	.attach_self = shm_rpc_attach_self,
	.attach_peer = shm_attach_peer,
	.worker_init = shm_rpc_worker_init,
	.worker_fini = shm_rpc_worker_fini,
	.post = shm_post,
	.poll = shm_rpc_poll,
	.worker_fds = shm_rpc_worker_fds,
	.fence = shm_rpc_fence,
	.post_rpc = shm_rpc_post,
	.peer_back = shm_rpc_peer_back,
};
