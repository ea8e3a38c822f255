/*
 * rng.h: the benchmark's pseudo-random numbers. SplitMix64 (a Weyl
 * sequence through a 64-bit finaliser): one add and three multiply-xor
 * steps per number, period 2^64, and good enough statistically for
 * choosing keys (it passes BigCrush). Every stream is seeded from --seed
 * and a stream number, so a run is repeatable stream by stream.
 *
 * Threads: a struct bench_rng belongs to one thread.
 */
#ifndef RCKV_BENCH_RNG_H
#define RCKV_BENCH_RNG_H

#include <stdint.h>

struct bench_rng {
	uint64_t s;
};

static inline uint64_t bench_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Seed a stream: distinct (seed, stream) pairs give unrelated sequences. */
static inline void bench_rng_seed(struct bench_rng *r, uint64_t seed, uint64_t stream)
{
	r->s = bench_mix64(seed ^ bench_mix64(stream + 0x9e3779b97f4a7c15ull));
}

static inline uint64_t bench_rng_next(struct bench_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ull; /* the golden-ratio Weyl increment */
	return bench_mix64(r->s);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double bench_rng_double(struct bench_rng *r)
{
	return (double)(bench_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform in [0, n), n >= 1 (multiply-shift: bias below n / 2^64). */
static inline uint64_t bench_rng_below(struct bench_rng *r, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)bench_rng_next(r) * n) >> 64);
}

#endif
