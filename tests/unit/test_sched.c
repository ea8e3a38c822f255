/*
 * test_sched: coroutines and the scheduler. Coroutines interleave at
 * sched_sleep, sleepers wake no earlier than asked, spawn refuses when the
 * pool is exhausted, and a finished coroutine's slot is reused.
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
	printf("test_sched: ok\n");
	return 0;
}
