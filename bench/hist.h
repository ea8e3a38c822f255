/*
 * hist.h: a latency histogram with logarithmic buckets, in the manner of
 * HdrHistogram (three significant digits).
 *
 * Values (nanoseconds here, but any unit) below 2048 each have their own
 * counter, so they are recorded exactly. Above, each power-of-two range
 * [2^e, 2^(e+1)) is cut into 1024 equal sub-buckets, so a recorded value
 * is known to within 1/1024 of itself (0.1%). A percentile is the value
 * at the nearest rank (the smallest recorded value v such that at least
 * p% of the values are <= v), reported as the highest value of its bucket
 * and never above the exact maximum: exact for values below 2048, at
 * most 0.1% high above. Minimum, maximum, count and sum (hence the mean)
 * are exact. Values from 2^44 up (about 4.9 hours in ns) share the last
 * bucket; the maximum stays exact.
 *
 * Memory: BENCH_HIST_COUNTS counters of 8 bytes (about 300 KB).
 *
 * Threads: a histogram belongs to one thread; merge them when the
 * threads are done (or under a lock the owner also takes).
 */
#ifndef RCKV_BENCH_HIST_H
#define RCKV_BENCH_HIST_H

#include <stdint.h>

#define BENCH_HIST_SUB_BITS 10 /* 1024 sub-buckets per power of two */
#define BENCH_HIST_EXACT (2u << BENCH_HIST_SUB_BITS) /* values below are exact: 2048 */
#define BENCH_HIST_TOP_BIT 44  /* values >= 2^44 go into the last bucket */
#define BENCH_HIST_COUNTS \
	((BENCH_HIST_TOP_BIT - BENCH_HIST_SUB_BITS + 1) << BENCH_HIST_SUB_BITS)

struct bench_hist {
	uint64_t count;
	uint64_t min, max; /* exact; min is UINT64_MAX while empty */
	double sum;        /* for the mean */
	uint64_t counts[BENCH_HIST_COUNTS];
};

/* Allocate an empty histogram (NULL if out of memory); free with free(). */
struct bench_hist *bench_hist_new(void);
void bench_hist_reset(struct bench_hist *h);
void bench_hist_record(struct bench_hist *h, uint64_t v);
/* dst += src */
void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src);
/* The p-th percentile (0 < p <= 100; p = 100 is the maximum); 0 if empty. */
uint64_t bench_hist_percentile(const struct bench_hist *h, double p);
double bench_hist_mean(const struct bench_hist *h);

/* Bucket arithmetic, exposed for the tests: the counter index of v, and
 * the smallest and largest values that share that counter. */
unsigned bench_hist_index(uint64_t v);
uint64_t bench_hist_lowest(unsigned idx);
uint64_t bench_hist_highest(unsigned idx);

#endif
