/*
 * zipf.h: Zipf-distributed ranks for the YCSB request distributions.
 *
 * The generator is the one YCSB uses, from Gray et al., "Quickly
 * generating billion-record synthetic databases" (SIGMOD 1994): the
 * normalising constant zeta(n, theta) = sum_{i=1..n} i^-theta is
 * precomputed once (and extended incrementally when n grows, for
 * "latest"), and a draw costs one uniform number and one pow().
 *
 * Gray's closed form treats the tail of the distribution as continuous:
 * it is exact for ranks 0 and 1 only, and at theta = 0.99 it draws rank 2
 * about 17% too often (ranks 2..10 are all over-drawn), which a
 * chi-square test over a million draws sees at once. So this generator
 * draws the first `head` ranks exactly, by a binary search in the
 * precomputed partial sums of zeta, and uses Gray's closed form only past
 * them, with its two constants fitted so that the distribution function
 * is exact at rank head-1 and at rank n-1. head = 2 gives YCSB's
 * generator exactly (same constants, same draws); the default head of 256
 * makes the deviation from the true Zipf law undetectable at a million
 * draws (tests/unit/test_bench.c checks both).
 *
 * This is the plain (not "scrambled") Zipfian: rank 0 is the most popular
 * item. rckv and Redis place keys by hash, so the popular items are
 * spread over slots and nodes anyway.
 *
 * Threads: bench_zipf_next() only reads the generator, so one generator
 * may serve any number of threads; bench_zipf_grow() changes it (give
 * each thread its own copy; the struct is plain data and copies with =).
 */
#ifndef RCKV_BENCH_ZIPF_H
#define RCKV_BENCH_ZIPF_H

#include <stdint.h>

#include "bench/rng.h"

#define BENCH_ZIPF_HEAD_DEFAULT 256
#define BENCH_ZIPF_HEAD_MAX 1024

struct bench_zipf {
	uint64_t n;        /* items: draws are ranks in [0, n) */
	double theta;      /* skew, 0 (uniform) <= theta < 1 */
	double alpha;      /* 1 / (1 - theta) */
	double zetan;      /* zeta(n, theta) */
	int head_cfg;      /* ranks to draw exactly, as configured */
	int head;          /* min(head_cfg, n) */
	double a, b;       /* tail: P(X <= k) = a + b ((k+1)/n)^(1-theta), k >= head-1 */
	double cum[BENCH_ZIPF_HEAD_MAX]; /* cum[k] = zeta(k+1, theta), k < head */
};

/* zeta(n, theta) = sum_{i=1..n} i^-theta, summed from the small terms up. */
double bench_zeta(uint64_t n, double theta);

/*
 * bench_zipf_init - a generator of ranks 0..n-1 with P(k) proportional to
 * (k+1)^-theta. head: ranks drawn exactly (2..BENCH_ZIPF_HEAD_MAX; 2 is
 * YCSB's generator). Costs O(n) pow() calls for zeta.
 * Returns 0, or -EINVAL for n == 0, theta outside [0, 1), or a bad head.
 */
int bench_zipf_init(struct bench_zipf *z, uint64_t n, double theta, int head);

/*
 * bench_zipf_grow - extend the generator to n >= z->n items, adding only
 * the new terms to zeta (O(n - z->n)). Returns 0, or -EINVAL if n < z->n.
 */
int bench_zipf_grow(struct bench_zipf *z, uint64_t n);

/* One rank in [0, z->n). */
uint64_t bench_zipf_next(const struct bench_zipf *z, struct bench_rng *r);

#endif
