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
 */
#include <stdint.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "rdma/fab_internal.h"

static void copy_words_in(void *dst, const char *src, uint32_t len)
{
	/* READ: remote src -> local dst. */
	if ((((uintptr_t)src | len) & 7) == 0) {
		uint64_t *d = dst;
		const uint64_t *s = (const uint64_t *)src;
		for (uint32_t i = 0; i < len / 8; i++)
			d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE); /* later ops see no older data */
	} else {
		memcpy(dst, src, len);
	}
}

static void copy_words_out(char *dst, const void *src, uint32_t len)
{
	/* WRITE: local src -> remote dst. Release: earlier ops on this
	 * endpoint are visible before any word of this one. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	if ((((uintptr_t)dst | len) & 7) == 0) {
		uint64_t *d = (uint64_t *)dst;
		const uint64_t *s = src;
		for (uint32_t i = 0; i < len / 8; i++)
			__atomic_store_n(&d[i], s[i], __ATOMIC_RELAXED);
	} else {
		memcpy(dst, src, len);
	}
}

static int shm_exec(struct fab_worker *fw, struct fab_op *ops, int n)
{
	for (int i = 0; i < n; i++) {
		struct fab_op *op = &ops[i];
		char *base = fw->f->peers[op->node].base;
		if (!base)
			return -EHOSTDOWN;
		char *p = base + op->off;
		uint64_t old;
		switch (op->kind) {
		case FAB_READ:
			copy_words_in(op->buf, p, op->len);
			break;
		case FAB_WRITE:
			copy_words_out(p, op->buf, op->len);
			break;
		case FAB_CAS:
			old = op->cmp;
			__atomic_compare_exchange_n((uint64_t *)p, &old, op->swp, false,
						    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
			if (op->old)
				*op->old = old;
			break;
		case FAB_FAA:
			old = __atomic_fetch_add((uint64_t *)p, op->swp, __ATOMIC_SEQ_CST);
			if (op->old)
				*op->old = old;
			break;
		}
	}
	return 0;
}

const struct fab_backend fab_shm_backend = {
	.name = "shm",
	.exec = shm_exec,
};
