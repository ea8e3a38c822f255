/*
 * zipf.c: Gray et al.'s Zipf generator with an exact head (see zipf.h).
 */
#include "bench/zipf.h"

#include <errno.h>
#include <math.h>
#include <string.h>

double bench_zeta(uint64_t n, double theta)
{
	double s = 0;

	/* smallest terms first: less rounding error for large n */
	for (uint64_t i = n; i >= 1; i--)
		s += pow((double)i, -theta);
	return s;
}

/* The tail's constants, so that P(X <= head-1) and P(X <= n-1) are exact. */
static void fit_tail(struct bench_zipf *z)
{
	if ((uint64_t)z->head >= z->n) {
		z->a = 0;
		z->b = 1;
		return;
	}
	double c0 = pow((double)z->head / (double)z->n, 1.0 - z->theta);
	z->b = (1.0 - z->cum[z->head - 1] / z->zetan) / (1.0 - c0);
	z->a = 1.0 - z->b;
}

/* Fill cum[] up to min(head_cfg, n) ranks, continuing from z->head. */
static void fill_head(struct bench_zipf *z)
{
	uint64_t want = z->n < (uint64_t)z->head_cfg ? z->n : (uint64_t)z->head_cfg;

	for (uint64_t k = (uint64_t)z->head; k < want; k++)
		z->cum[k] = (k ? z->cum[k - 1] : 0.0) + pow((double)(k + 1), -z->theta);
	z->head = (int)want;
}

int bench_zipf_init(struct bench_zipf *z, uint64_t n, double theta, int head)
{
	if (n == 0 || !(theta >= 0.0 && theta < 1.0) || head < 2 || head > BENCH_ZIPF_HEAD_MAX)
		return -EINVAL;
	memset(z, 0, sizeof(*z));
	z->n = n;
	z->theta = theta;
	z->alpha = 1.0 / (1.0 - theta);
	z->head_cfg = head;
	z->zetan = bench_zeta(n, theta);
	fill_head(z);
	fit_tail(z);
	return 0;
}

int bench_zipf_grow(struct bench_zipf *z, uint64_t n)
{
	if (n < z->n)
		return -EINVAL;
	if (n == z->n)
		return 0;
	/* new terms are the smallest: add them smallest first as bench_zeta does */
	double add = 0;
	for (uint64_t i = n; i > z->n; i--)
		add += pow((double)i, -z->theta);
	z->zetan += add;
	z->n = n;
	fill_head(z);
	fit_tail(z);
	return 0;
}

uint64_t bench_zipf_next(const struct bench_zipf *z, struct bench_rng *r)
{
	double u = bench_rng_double(r);
	double x = u * z->zetan;

	if (x < z->cum[z->head - 1] || (uint64_t)z->head >= z->n) {
		/* exact head: the smallest k with x < zeta(k+1) */
		int lo = 0, hi = z->head - 1;
		while (lo < hi) {
			int mid = (lo + hi) / 2;
			if (x < z->cum[mid])
				hi = mid;
			else
				lo = mid + 1;
		}
		return (uint64_t)lo;
	}
	/* Gray's closed form: invert a + b ((k+1)/n)^(1-theta) */
	double t = (u - z->a) / z->b;
	double k = floor((double)z->n * pow(t > 0 ? t : 0, z->alpha));
	if (k < z->head)
		return (uint64_t)z->head;
	if (k >= (double)z->n)
		return z->n - 1;
	return (uint64_t)k;
}
