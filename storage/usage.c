/*
 * usage.c: what the MemStore spends, for INFO memory and maxmemory
 * (server/cmd_server.c, server/memory.c).
 *
 * st_region_usage reads the slab table and the free bitmaps of the local
 * mapping while one-sided allocators change them: each word is read once,
 * atomically (relaxed: a snapshot of counters needs no order), so the sums
 * are those of some moment during the walk for each word, exact when
 * nothing allocates. Cost: 8 bytes per slab and one bitmap per assigned
 * slab (8 KiB per 4 MiB of data), about 1 MB of reads for a 512 MiB
 * region; callers cache it (server/memory.c).
 *
 * st_region_resident asks the kernel which pages of a range of the mapping
 * are in memory (mincore): pages of the region file that no one has
 * touched are holes and cost nothing, so this is what the region adds to
 * the process's RSS, range by range.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "storage/st_internal.h"

void st_region_usage(struct st_region *r, struct st_usage *u)
{
	const struct st_layout *L = &r->layout;
	*u = (struct st_usage){ .region_bytes = L->size,
				.index_bytes = L->index_buckets * 64,
				.slab_bytes = L->slab_count * (uint64_t)ST_SLAB_BYTES,
				.slabs = L->slab_count };
	const uint64_t *tab = (const uint64_t *)(r->base + L->slabtab_off);
	for (uint64_t s = 0; s < L->slab_count; s++) {
		uint64_t t = __atomic_load_n(&tab[s], __ATOMIC_RELAXED);
		if (t == 0 || t > ST_NCLASSES) {
			u->free_bytes += ST_SLAB_BYTES;
			continue;
		}
		unsigned cls = (unsigned)t - 1;
		const uint64_t *bm = (const uint64_t *)(r->base + st_bitmap_word_off(L, s, 0));
		uint64_t used = 0;
		for (uint32_t w = 0; w < st_cwords(cls); w++)
			used += (uint64_t)__builtin_popcountll(__atomic_load_n(&bm[w], __ATOMIC_RELAXED));
		u->slabs_assigned++;
		u->blocks_used += used;
		u->used_bytes += used * st_csize(cls);
		u->free_bytes += (st_cblocks(cls) - used) * (uint64_t)st_csize(cls);
	}
}

int64_t st_region_resident(struct st_region *r, uint64_t off, uint64_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0 || off > r->mapped_len)
		return -EINVAL;
	if (len > r->mapped_len - off)
		len = r->mapped_len - off;
	uint64_t a = off & ~((uint64_t)page - 1), e = off + len;
	if (e <= a)
		return 0;
	uint64_t pages = (e - a + (uint64_t)page - 1) / (uint64_t)page;
	/* In chunks, so a terabyte region needs no gigabyte vector. */
	enum { CHUNK = 1 << 16 };
	unsigned char *vec = malloc(CHUNK);
	if (!vec)
		return -ENOMEM;
	int64_t n = 0;
	for (uint64_t p = 0; p < pages; p += CHUNK) {
		uint64_t k = pages - p < CHUNK ? pages - p : CHUNK;
		if (mincore(r->base + a + p * (uint64_t)page, k * (uint64_t)page, vec) != 0) {
			n = -errno;
			break;
		}
		for (uint64_t i = 0; i < k; i++)
			n += vec[i] & 1;
	}
	free(vec);
	return n < 0 ? n : n * page;
}
