/*
 * memory: used_memory as INFO memory reports it and as maxmemory checks it
 * (issue 21). used_memory = the MemStore's allocated blocks, each at its
 * size class (st_region_usage), plus the process's heap (mallinfo2: bytes
 * malloc has handed out, in its arenas and in mmapped chunks). The
 * region's own size, its free space, its fixed index and what of it is
 * resident are reported in their own fields (rckv_*), not in used_memory.
 */
#ifndef RCKV_SRV_MEMORY_H
#define RCKV_SRV_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/st.h"

struct node;
struct cmd_def;

struct srv_mem {
	uint64_t used;       /* used_memory: store + heap */
	uint64_t store;      /* MemStore blocks in use */
	uint64_t heap;       /* malloc'd bytes in use */
	uint64_t peak;       /* the largest `used` seen since start */
	struct st_usage st;  /* the region's figures */
};

/* A fresh sample (walks the region's bitmaps: ~1 MB of reads per 512 MiB
 * of region); updates the cache and the peak. Any thread. */
void srv_mem_sample(struct node *n, struct srv_mem *out);

/* used_memory as of at most SRV_MEM_MAX_AGE_MS ago (sampled again by the
 * first caller after that). Any thread. */
#define SRV_MEM_MAX_AGE_MS 100
uint64_t srv_mem_used(struct node *n);

/* Is def refused for memory: maxmemory is set, def may add data (the
 * command table's CMD_DENYOOM) and used_memory is over maxmemory? A
 * burst of writes may overshoot by what SRV_MEM_MAX_AGE_MS of them add,
 * as Redis's own check lets one command overshoot. Any thread. */
bool srv_mem_refuses(struct node *n, const struct cmd_def *def);

/* Redis's reply to such a command, without the leading '-'. */
#define SRV_OOM_MAXMEMORY "OOM command not allowed when used memory > 'maxmemory'."

/* The reply when the MemStore region has no block for a write (CC_EFULL),
 * whatever maxmemory says. */
#define SRV_OOM_STORE_FULL \
	"OOM command not allowed: the MemStore is full (the region's 'memory' holds no free " \
	"block for it)"

/* The process's resident set (/proc/self/statm), 0 if unknown. */
uint64_t srv_mem_rss(void);

/* "1.50M" as Redis's bytesToHuman writes it (B, K, M, G, T, P). */
void srv_bytes_human(char *buf, size_t cap, uint64_t n);

#endif
