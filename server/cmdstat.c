/*
 * cmdstat.c: per-command counters and latency histograms, per worker
 * (cmdstat.h).
 *
 * A histogram is log-linear over nanoseconds: values below 2^SUB_BITS
 * have a bucket each; above, each power of two is split into 2^SUB_BITS
 * buckets, so a bucket's width is at most 1/16 of its values (Redis uses
 * HdrHistogram with 2 significant digits; 6% is enough to tell p99 from
 * p50, and keeps a histogram at 2.5 KiB). A percentile is reported as its
 * bucket's upper bound, as HdrHistogram reports the highest equivalent
 * value. A histogram is allocated by the owner on a command's first call,
 * so commands never called cost nothing.
 */
#include "server/cmdstat.h"

#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/command.h"
#include "server/node.h"
#include "server/strutil.h"
#include "server/worker.h"

#define SUB_BITS 4
#define SUB (1u << SUB_BITS)
#define MAX_EXP 44 /* 2^44 ns: about 4.9 hours; longer counts in the last bucket */
#define NBUCKETS ((MAX_EXP - SUB_BITS + 1) * SUB + SUB)

struct row {
	uint64_t calls, ns, rejected, failed;
	uint64_t *hist; /* NBUCKETS counts, or NULL; set once by the owner (ck_pr) */
};

struct cmdstat {
	int n;
	struct row rows[];
};

struct cmdstat *cmdstat_create(void)
{
	int n = cmd_id_count();
	struct cmdstat *s = calloc(1, sizeof(*s) + (size_t)n * sizeof(struct row));
	if (s)
		s->n = n;
	return s;
}

void cmdstat_free(struct cmdstat *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++)
		free(s->rows[i].hist);
	free(s);
}

static unsigned bucket_of(uint64_t ns)
{
	if (ns < SUB)
		return (unsigned)ns;
	unsigned e = 63u - (unsigned)__builtin_clzll(ns); /* >= SUB_BITS */
	if (e > MAX_EXP)
		return NBUCKETS - 1;
	unsigned mant = (unsigned)(ns >> (e - SUB_BITS)) & (SUB - 1);
	return (e - SUB_BITS + 1) * SUB + mant;
}

/* The largest value that falls in bucket b. */
static uint64_t bucket_top(unsigned b)
{
	if (b < SUB)
		return b;
	unsigned e = b / SUB + SUB_BITS - 1, mant = b % SUB;
	uint64_t lo = ((uint64_t)(SUB + mant)) << (e - SUB_BITS);
	return lo + (1ull << (e - SUB_BITS)) - 1;
}

void cmdstat_call(struct cmdstat *s, int id, uint64_t ns, bool failed, bool hist)
{
	if (!s || id < 0 || id >= s->n)
		return;
	struct row *r = &s->rows[id];
	r->calls++;
	r->ns += ns;
	if (failed)
		r->failed++;
	if (!hist)
		return;
	if (!r->hist) {
		uint64_t *h = calloc(NBUCKETS, sizeof(*h));
		if (!h)
			return;
		ck_pr_store_ptr(&r->hist, h); /* readers see it zeroed (calloc) */
	}
	r->hist[bucket_of(ns)]++;
}

void cmdstat_reject(struct cmdstat *s, int id)
{
	if (s && id >= 0 && id < s->n)
		s->rows[id].rejected++;
}

/* Row id summed over the workers. */
static void sum_row(struct node *n, int id, struct row *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < n->nworkers; i++) {
		struct worker *w = n->workers[i];
		if (!w || !w->cstat || id >= w->cstat->n)
			continue;
		struct row *r = &w->cstat->rows[id];
		out->calls += ck_pr_load_64(&r->calls);
		out->ns += ck_pr_load_64(&r->ns);
		out->rejected += ck_pr_load_64(&r->rejected);
		out->failed += ck_pr_load_64(&r->failed);
	}
}

void cmdstat_info_commands(struct node *n, struct srv_sbuf *b)
{
	int ids = cmd_id_count();
	for (int id = 0; id < ids; id++) {
		struct row r;
		sum_row(n, id, &r);
		if (!r.calls && !r.rejected && !r.failed)
			continue;
		double usec = (double)r.ns / 1000.0;
		srv_sbuf_printf(b,
				"cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,"
				"rejected_calls=%llu,failed_calls=%llu\r\n",
				cmd_by_id(id)->name, (unsigned long long)r.calls,
				(unsigned long long)(r.ns / 1000),
				r.calls ? usec / (double)r.calls : 0.0,
				(unsigned long long)r.rejected, (unsigned long long)r.failed);
	}
}

void cmdstat_info_latency(struct node *n, struct srv_sbuf *b)
{
	static const double pcts[] = { 50.0, 99.0, 99.9 };
	static const char *const names[] = { "50", "99", "99.9" };
	uint64_t *h = malloc(NBUCKETS * sizeof(*h));
	if (!h)
		return;
	int ids = cmd_id_count();
	for (int id = 0; id < ids; id++) {
		uint64_t total = 0;
		memset(h, 0, NBUCKETS * sizeof(*h));
		for (int i = 0; i < n->nworkers; i++) {
			struct worker *w = n->workers[i];
			if (!w || !w->cstat || id >= w->cstat->n)
				continue;
			uint64_t *wh = ck_pr_load_ptr(&w->cstat->rows[id].hist);
			if (!wh)
				continue;
			for (unsigned k = 0; k < NBUCKETS; k++) {
				uint64_t v = ck_pr_load_64(&wh[k]);
				h[k] += v;
				total += v;
			}
		}
		if (!total)
			continue;
		srv_sbuf_printf(b, "latency_percentiles_usec_%s:", cmd_by_id(id)->name);
		for (int p = 0; p < 3; p++) {
			/* The smallest value with at least pct% of the calls at or
			 * below it, as HdrHistogram's value_at_percentile. */
			uint64_t want = (uint64_t)((pcts[p] / 100.0) * (double)total + 0.5);
			if (want < 1)
				want = 1;
			uint64_t seen = 0;
			unsigned k = 0;
			for (; k < NBUCKETS - 1; k++) {
				seen += h[k];
				if (seen >= want)
					break;
			}
			srv_sbuf_printf(b, "%sp%s=%.3f", p ? "," : "", names[p],
					(double)bucket_top(k) / 1000.0);
		}
		srv_sbuf_printf(b, "\r\n");
	}
	free(h);
}

void cmdstat_reset(struct node *n)
{
	for (int i = 0; i < n->nworkers; i++) {
		struct worker *w = n->workers[i];
		if (!w || !w->cstat)
			continue;
		for (int id = 0; id < w->cstat->n; id++) {
			struct row *r = &w->cstat->rows[id];
			ck_pr_store_64(&r->calls, 0);
			ck_pr_store_64(&r->ns, 0);
			ck_pr_store_64(&r->rejected, 0);
			ck_pr_store_64(&r->failed, 0);
			uint64_t *h = ck_pr_load_ptr(&r->hist);
			for (unsigned k = 0; h && k < NBUCKETS; k++)
				ck_pr_store_64(&h[k], 0);
		}
	}
}
