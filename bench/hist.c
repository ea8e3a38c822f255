/*
 * hist.c: log-bucketed histogram (see hist.h for the layout and the
 * error bound).
 *
 * Layout: index = v for v < 2048. For larger v with top bit e (11 <= e),
 * shift = e - 10 and sub = v >> shift lies in [1024, 2048); index =
 * shift * 1024 + sub. So each power of two adds 1024 counters, and the
 * bucket of index i covers [sub << shift, ((sub + 1) << shift) - 1].
 */
#include "bench/hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SUB_COUNT (1u << BENCH_HIST_SUB_BITS)

struct bench_hist *bench_hist_new(void)
{
	struct bench_hist *h = malloc(sizeof(*h));

	if (h)
		bench_hist_reset(h);
	return h;
}

void bench_hist_reset(struct bench_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned bench_hist_index(uint64_t v)
{
	if (v >= (1ull << BENCH_HIST_TOP_BIT))
		return BENCH_HIST_COUNTS - 1;
	if (v < BENCH_HIST_EXACT)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v);
	unsigned shift = e - BENCH_HIST_SUB_BITS;
	return shift * SUB_COUNT + (unsigned)(v >> shift);
}

static unsigned idx_shift(unsigned idx)
{
	return idx < BENCH_HIST_EXACT ? 0 : idx / SUB_COUNT - 1;
}

uint64_t bench_hist_lowest(unsigned idx)
{
	unsigned shift = idx_shift(idx);
	uint64_t sub = idx - shift * SUB_COUNT;
	return sub << shift;
}

uint64_t bench_hist_highest(unsigned idx)
{
	unsigned shift = idx_shift(idx);
	uint64_t sub = idx - shift * SUB_COUNT;
	return ((sub + 1) << shift) - 1;
}

void bench_hist_record(struct bench_hist *h, uint64_t v)
{
	h->counts[bench_hist_index(v)]++;
	h->count++;
	h->sum += (double)v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src)
{
	if (!src->count)
		return;
	for (unsigned i = 0; i < BENCH_HIST_COUNTS; i++)
		dst->counts[i] += src->counts[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

uint64_t bench_hist_percentile(const struct bench_hist *h, double p)
{
	if (!h->count)
		return 0;
	if (p >= 100.0)
		return h->max;
	/* nearest rank: the ceil(p% of count)-th smallest value, at least the 1st;
	 * the small epsilon keeps 99.9% of 1000 at rank 999, not 1000 */
	double r = ceil(p / 100.0 * (double)h->count - 1e-9);
	uint64_t rank = r < 1 ? 1 : (uint64_t)r;
	uint64_t seen = 0;
	for (unsigned i = 0; i < BENCH_HIST_COUNTS; i++) {
		seen += h->counts[i];
		if (seen >= rank) {
			uint64_t v = bench_hist_highest(i);
			if (v > h->max)
				v = h->max;
			if (v < h->min)
				v = h->min;
			return v;
		}
	}
	return h->max;
}

double bench_hist_mean(const struct bench_hist *h)
{
	return h->count ? h->sum / (double)h->count : 0.0;
}
