/*
 * test_sched: coroutines and the scheduler. Coroutines interleave at
 * sched_sleep, sleepers wake no earlier than asked, spawn refuses when the
 * pool is exhausted, and a finished coroutine's slot is reused. A reserved
 * coroutine is out of sched_spawn's reach and sched_spawn_reserved's to
 * take; a timed park ends by an unpark (true) or by its deadline (false),
 * and an unpark of a timed park takes it off the sleepers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cc/coro.h"
#include "cc/sched.h"

#define CHECK(c)                                                                    \
	do {                                                                        \
		if (!(c)) {                                                         \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			exit(1);                                                    \
		}                                                                   \
	} while (0)

static struct sched *S;
static char trace[64];
static int tpos;

static void step_fn(struct sched *s, void *arg)
{
	char c = (char)(intptr_t)arg;
	for (int i = 0; i < 3; i++) {
		trace[tpos++] = c;
		sched_sleep(s, 0);
	}
}

static uint64_t woke_after;
static void sleeper(struct sched *s, void *arg)
{
	uint64_t t0 = sched_now_ns();
	sched_sleep(s, 20 * 1000 * 1000);
	woke_after = sched_now_ns() - t0;
}

/* Timed parks: park for 1 s and be unparked at once, then park for 5 ms
 * and time out. */
static void *parked_handle;
static int park_results[2] = { -1, -1 };
static uint64_t park_took[2];
static void timed_parker(struct sched *s, void *arg)
{
	(void)arg;
	for (int i = 0; i < 2; i++) {
		uint64_t t0 = sched_now_ns();
		parked_handle = sched_self(s);
		park_results[i] = sched_park_timeout(s, i == 0 ? 1000000000ull : 5000000ull);
		park_took[i] = sched_now_ns() - t0;
	}
	parked_handle = NULL;
}

static void plain(struct coro *co, void *arg)
{
	int *x = arg;
	(*x)++;
	coro_yield(co);
	(*x)++;
}

int main(void)
{
	/* raw coroutine */
	int x = 0;
	struct coro *co = coro_create(64 * 1024, plain, &x);
	CHECK(co);
	coro_resume(co);
	CHECK(x == 1 && !coro_done(co));
	coro_resume(co);
	CHECK(x == 2 && coro_done(co));
	coro_destroy(co);

	/* round robin */
	S = sched_create(2, 64 * 1024);
	CHECK(S);
	CHECK(sched_spawn(S, step_fn, (void *)(intptr_t)'a') == 0);
	CHECK(sched_spawn(S, step_fn, (void *)(intptr_t)'b') == 0);
	CHECK(sched_spawn(S, step_fn, (void *)(intptr_t)'c') == -EAGAIN);
	while (!sched_idle(S))
		sched_run(S);
	trace[tpos] = 0;
	CHECK(strcmp(trace, "ababab") == 0);
	CHECK(sched_free_count(S) == 2);

	/* sleeping and timeouts */
	CHECK(sched_timeout_ms(S) == -1);
	CHECK(sched_spawn(S, sleeper, NULL) == 0);
	sched_run(S);
	int to = sched_timeout_ms(S);
	CHECK(to > 0 && to <= 20);
	while (!sched_idle(S)) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		sched_run(S);
	}
	CHECK(woke_after >= 20 * 1000 * 1000);
	sched_destroy(S);

	/* a reserve: one of two coroutines is out of sched_spawn's reach */
	S = sched_create(2, 64 * 1024);
	CHECK(S);
	sched_reserve(S, 1);
	CHECK(sched_free_count(S) == 1);
	tpos = 0;
	CHECK(sched_spawn(S, step_fn, (void *)(intptr_t)'a') == 0);
	CHECK(sched_spawn(S, step_fn, (void *)(intptr_t)'b') == -EAGAIN);
	CHECK(sched_free_count(S) == 0);
	CHECK(sched_spawn_reserved(S, step_fn, (void *)(intptr_t)'r') == 0);
	CHECK(sched_spawn_reserved(S, step_fn, (void *)(intptr_t)'x') == -EAGAIN);
	while (!sched_idle(S))
		sched_run(S);
	trace[tpos] = 0;
	CHECK(strcmp(trace, "ararar") == 0); /* the reserved one runs like any other */
	CHECK(sched_free_count(S) == 1);

	/* timed parks */
	CHECK(sched_spawn(S, timed_parker, NULL) == 0);
	sched_run(S); /* parks for up to 1 s */
	CHECK(parked_handle && park_results[0] == -1);
	CHECK(sched_timeout_ms(S) > 100); /* on the sleepers, for its deadline */
	sched_unpark(S, parked_handle);
	sched_run(S); /* unparked: true, then parks for 5 ms */
	CHECK(park_results[0] == 1 && park_took[0] < 500000000ull);
	while (!sched_idle(S)) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		sched_run(S);
	}
	CHECK(park_results[1] == 0 && park_took[1] >= 5000000ull);
	sched_destroy(S);
	printf("test_sched: ok\n");
	return 0;
}
