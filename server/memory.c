/*
 * memory.c: used_memory and the maxmemory check (server/memory.h).
 *
 * The cache (node.mem_used, mem_at_ms, mem_peak) is written by whichever
 * thread samples, with ck_pr stores; a racing second sampler only writes
 * the same kind of value again. Readers load it with ck_pr; nothing else
 * is ordered against it.
 */
#include <ck_pr.h>
#include <malloc.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "server/command.h"
#include "server/memory.h"
#include "server/node.h"

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void srv_mem_sample(struct node *n, struct srv_mem *out)
{
	struct mallinfo2 mi = mallinfo2();
	st_region_usage(n->cc.region, &out->st);
	out->heap = mi.uordblks + mi.hblkhd;
	out->store = out->st.used_bytes;
	out->used = out->store + out->heap;
	uint64_t peak = ck_pr_load_64(&n->mem_peak);
	while (out->used > peak && !ck_pr_cas_64_value(&n->mem_peak, peak, out->used, &peak))
		;
	out->peak = out->used > peak ? out->used : peak;
	ck_pr_store_64(&n->mem_used, out->used);
	ck_pr_store_64(&n->mem_at_ms, now_ms());
}

uint64_t srv_mem_rss(void)
{
	unsigned long long size, resident = 0;
	long page = sysconf(_SC_PAGESIZE);
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &resident) != 2 || page <= 0)
		resident = 0;
	fclose(f);
	return resident * (uint64_t)(page > 0 ? page : 0);
}

uint64_t srv_mem_used(struct node *n)
{
	uint64_t at = ck_pr_load_64(&n->mem_at_ms), now = now_ms();
	/* One sampler per period: the CAS on the time elects it. */
	if ((at == 0 || now - at >= SRV_MEM_MAX_AGE_MS) && ck_pr_cas_64(&n->mem_at_ms, at, now)) {
		struct srv_mem m;
		srv_mem_sample(n, &m);
		return m.used;
	}
	return ck_pr_load_64(&n->mem_used);
}

bool srv_mem_refuses(struct node *n, const struct cmd_def *def)
{
	uint64_t max = ck_pr_load_64((uint64_t *)&n->cfg.maxmemory);
	return max != 0 && (def->flags & CMD_DENYOOM) && srv_mem_used(n) > max;
}

void srv_bytes_human(char *buf, size_t cap, uint64_t n)
{
	static const char units[] = "KMGTP";
	if (n < 1024) {
		snprintf(buf, cap, "%lluB", (unsigned long long)n);
		return;
	}
	double d = (double)n / 1024;
	int u = 0;
	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	snprintf(buf, cap, "%.2f%c", d, units[u]);
}
