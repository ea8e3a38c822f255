/*
 * fab_apply.h: how a CPU applies one-sided operations to a region it can
 * reach (rdma/ private): the shm backend for every node, fab_exec for
 * direct peers, the tcp NIC for its peers' requests.
 */
#ifndef RCKV_FAB_APPLY_H
#define RCKV_FAB_APPLY_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "rdma/fab.h"

/*
 * Copies are done word by word with relaxed atomics (and byte by byte with
 * relaxed atomics for a ragged head or tail), never with memcpy: a racing
 * reader then sees each aligned 8-byte word old or new, never half of it,
 * which is the fabric's contract, and the race is a defined one for the
 * compiler and for ThreadSanitizer.
 */
static inline void fab_copy_in(void *dst, const char *src, uint32_t len)
{
	/* READ: remote src -> local dst. */
	char *d = dst;
	while (len && ((uintptr_t)src & 7)) {
		*d++ = __atomic_load_n(src++, __ATOMIC_RELAXED);
		len--;
	}
	const uint64_t *s8 = (const uint64_t *)src;
	uint32_t words = len / 8;
	for (uint32_t i = 0; i < words; i++) {
		uint64_t v = __atomic_load_n(&s8[i], __ATOMIC_RELAXED);
		memcpy(d + 8 * i, &v, 8); /* local and private: plain copy is fine */
	}
	d += 8 * words;
	src += 8 * words;
	for (uint32_t i = 0; i < len % 8; i++)
		d[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE); /* later ops see no older data */
}

static inline void fab_copy_out(char *dst, const void *src, uint32_t len)
{
	/* WRITE: local src -> remote dst. Release: earlier ops on this
	 * endpoint are visible before any word of this one. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	const char *s = src;
	while (len && ((uintptr_t)dst & 7)) {
		__atomic_store_n(dst++, *s++, __ATOMIC_RELAXED);
		len--;
	}
	uint64_t *d8 = (uint64_t *)dst;
	uint32_t words = len / 8;
	for (uint32_t i = 0; i < words; i++) {
		uint64_t v;
		memcpy(&v, s + 8 * i, 8);
		__atomic_store_n(&d8[i], v, __ATOMIC_RELAXED);
	}
	dst += 8 * words;
	s += 8 * words;
	for (uint32_t i = 0; i < len % 8; i++)
		__atomic_store_n(&dst[i], s[i], __ATOMIC_RELAXED);
}

/* One operation whose bounds (and CAS/FAA alignment) were checked by the
 * caller. Returns -EINVAL for an unknown kind. */
static inline int fab_apply_one(char *base, struct fab_op *op)
{
	char *p = base + op->off;
	uint64_t old;
	switch (op->kind) {
	case FAB_READ:
		fab_copy_in(op->buf, p, op->len);
		return 0;
	case FAB_WRITE:
		fab_copy_out(p, op->buf, op->len);
		return 0;
	case FAB_CAS:
		old = op->cmp;
		__atomic_compare_exchange_n((uint64_t *)p, &old, op->swp, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		if (op->old)
			*op->old = old;
		return 0;
	case FAB_FAA:
		old = __atomic_fetch_add((uint64_t *)p, op->swp, __ATOMIC_SEQ_CST);
		if (op->old)
			*op->old = old;
		return 0;
	default:
		return -EINVAL;
	}
}

#endif
