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
#include <strings.h>

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

/* A command's histogram summed over the workers into h; its calls. */
static uint64_t sum_hist(struct node *n, int id, uint64_t *h)
{
	uint64_t total = 0;
	memset(h, 0, NBUCKETS * sizeof(*h));
	for (int i = 0; i < n->nworkers; i++) {
		struct worker *w = n->workers[i];
		if (!w || !w->cstat || id >= w->cstat->n)
			continue;
		uint64_t *wh = ck_pr_load_ptr(&w->cstat->rows[id].hist);
		for (unsigned k = 0; wh && k < NBUCKETS; k++) {
			uint64_t v = ck_pr_load_64(&wh[k]);
			h[k] += v;
			total += v;
		}
	}
	return total;
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
		uint64_t total = sum_hist(n, id, h);
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

/* One command's LATENCY HISTOGRAM entry: Redis's cumulative counts at
 * doubling bounds from 1024 ns, keyed by the bound in whole us. */
static void reply_one(struct resp_w *out, const struct cmd_def *d, const uint64_t *h,
		      uint64_t total)
{
	uint64_t bounds[64], cum[64];
	int nb = 0;
	uint64_t seen = 0;
	unsigned k = 0;
	for (uint64_t bound = 1024; seen < total && nb < 64; bound *= 2) {
		/* Past the histogram's range, the last bucket holds the rest. */
		while (k < NBUCKETS && (bucket_top(k) <= bound || bound >= (1ull << MAX_EXP)))
			seen += h[k++];
		if (nb == 0 ? seen > 0 : seen > cum[nb - 1]) {
			bounds[nb] = bound / 1000;
			cum[nb++] = seen;
		}
	}
	resp_bulk_cstr(out, d->name);
	resp_map(out, 2);
	resp_bulk_cstr(out, "calls");
	resp_int(out, (long long)total);
	resp_bulk_cstr(out, "histogram_usec");
	resp_map(out, nb);
	for (int i = 0; i < nb; i++) {
		resp_int(out, (long long)bounds[i]);
		resp_int(out, (long long)cum[i]);
	}
}

void cmdstat_reply_histogram(struct node *n, struct resp_w *out, int argc,
			     const struct resp_arg *argv)
{
	int ids = cmd_id_count();
	uint64_t *h = malloc(NBUCKETS * sizeof(*h));
	char *want = calloc((size_t)ids, 1);
	if (!h || !want) {
		free(h);
		free(want);
		resp_error(out, "ERR out of memory");
		return;
	}
	/* No names: every command; a container's name: its subcommands. */
	for (int id = 0; id < ids; id++) {
		const struct cmd_def *d = cmd_by_id(id);
		bool hit = argc == 0;
		for (int i = 0; i < argc && !hit; i++) {
			const char *bar = strchr(d->name, '|');
			size_t plen = bar ? (size_t)(bar - d->name) : strlen(d->name);
			hit = (argv[i].len == strlen(d->name) &&
			       strncasecmp(argv[i].p, d->name, argv[i].len) == 0) ||
			      (bar && argv[i].len == plen && strncasecmp(argv[i].p, d->name, plen) == 0);
		}
		want[id] = hit;
	}
	struct resp_w body;
	resp_w_init(&body, out->proto);
	long nout = 0;
	for (int id = 0; id < ids; id++) {
		if (!want[id])
			continue;
		uint64_t total = sum_hist(n, id, h);
		if (!total)
			continue;
		reply_one(&body, cmd_by_id(id), h, total);
		nout++;
	}
	resp_map(out, nout);
	resp_w_append(out, &body);
	resp_w_free(&body);
	free(h);
	free(want);
}
