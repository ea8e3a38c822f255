/*
 * sched.c: a worker's coroutine scheduler. A fixed pool of coroutines; each
 * runs an endless loop "wait for a task, run it", so stacks are reused and
 * spawning costs no allocation. Ready coroutines run round-robin; sleepers
 * wait on a small list ordered by deadline (pools are tens of coroutines,
 * so a linear insert is cheaper than a heap). Owner thread only.
 */
#include "cc/sched.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "cc/coro.h"

enum slot_state {
	SLOT_FREE,
	SLOT_READY,
	SLOT_RUNNING,
	SLOT_SLEEPING,
	SLOT_PARKED,
	SLOT_PARKED_TIMED, /* parked, and on the sleep list for its deadline */
};

struct slot {
	struct coro *co;
	struct sched *s;
	enum slot_state state;
	sched_fn fn;
	void *arg;
	uint64_t deadline;     /* SLOT_SLEEPING: wake time, ns */
	bool unparked;         /* an unpark arrived before the park */
	bool timed_out;        /* SLOT_PARKED_TIMED: the deadline woke it */
	struct slot *next;     /* ready queue, sleep list or free list */
};

struct sched {
	int n;
	struct slot *slots;
	struct slot *free;
	struct slot *ready_head, *ready_tail;
	struct slot *sleepers; /* ascending deadline */
	struct slot *current;  /* the slot running now, or NULL */
	int busy;              /* slots not FREE */
	int reserve;           /* slots only sched_spawn_reserved takes */
};

uint64_t sched_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void push_ready(struct sched *s, struct slot *sl)
{
	sl->state = SLOT_READY;
	sl->next = NULL;
	if (s->ready_tail)
		s->ready_tail->next = sl;
	else
		s->ready_head = sl;
	s->ready_tail = sl;
}

static struct slot *pop_ready(struct sched *s)
{
	struct slot *sl = s->ready_head;
	if (sl) {
		s->ready_head = sl->next;
		if (!s->ready_head)
			s->ready_tail = NULL;
	}
	return sl;
}

static void slot_main(struct coro *co, void *arg)
{
	struct slot *sl = arg;
	for (;;) {
		sl->fn(sl->s, sl->arg);
		sl->fn = NULL;
		sl->state = SLOT_FREE;
		sl->next = sl->s->free;
		sl->s->free = sl;
		sl->s->busy--;
		coro_yield(co);
	}
}

struct sched *sched_create(int ncoro, size_t stack)
{
	struct sched *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->slots = calloc((size_t)ncoro, sizeof(struct slot));
	if (!s->slots)
		goto fail;
	s->n = ncoro;
	for (int i = ncoro - 1; i >= 0; i--) {
		struct slot *sl = &s->slots[i];
		sl->s = s;
		sl->co = coro_create(stack, slot_main, sl);
		if (!sl->co)
			goto fail;
		sl->next = s->free;
		s->free = sl;
	}
	return s;
fail:
	sched_destroy(s);
	return NULL;
}

void sched_destroy(struct sched *s)
{
	if (!s)
		return;
	if (s->slots)
		for (int i = 0; i < s->n; i++)
			coro_destroy(s->slots[i].co);
	free(s->slots);
	free(s);
}

int sched_spawn(struct sched *s, sched_fn fn, void *arg)
{
	if (s->n - s->busy <= s->reserve)
		return -EAGAIN;
	return sched_spawn_reserved(s, fn, arg);
}

void sched_reserve(struct sched *s, int k)
{
	s->reserve = k < 0 ? 0 : k;
}

int sched_spawn_reserved(struct sched *s, sched_fn fn, void *arg)
{
	struct slot *sl = s->free;
	if (!sl)
		return -EAGAIN;
	s->free = sl->next;
	sl->fn = fn;
	sl->arg = arg;
	s->busy++;
	push_ready(s, sl);
	return 0;
}

static void wake_due(struct sched *s, uint64_t now)
{
	while (s->sleepers && s->sleepers->deadline <= now) {
		struct slot *sl = s->sleepers;
		s->sleepers = sl->next;
		sl->timed_out = sl->state == SLOT_PARKED_TIMED;
		push_ready(s, sl);
	}
}

int sched_run(struct sched *s)
{
	if (s->sleepers)
		wake_due(s, sched_now_ns());
	/* Run only what is ready now: a coroutine that yields with sleep(0)
	 * goes to the back and waits for the next round, so the worker gets
	 * back to its epoll loop between rounds. */
	struct slot *last = s->ready_tail;
	int ran = 0;
	while (last) {
		struct slot *sl = pop_ready(s);
		sl->state = SLOT_RUNNING;
		s->current = sl;
		coro_resume(sl->co);
		s->current = NULL;
		ran++;
		if (sl == last)
			break;
	}
	return ran;
}

int sched_timeout_ms(struct sched *s)
{
	if (s->ready_head)
		return 0;
	if (!s->sleepers)
		return -1;
	uint64_t now = sched_now_ns();
	if (s->sleepers->deadline <= now)
		return 0;
	uint64_t ms = (s->sleepers->deadline - now + 999999) / 1000000;
	return ms > 1000 ? 1000 : (int)ms;
}

int64_t sched_timeout_ns(struct sched *s)
{
	if (s->ready_head)
		return 0;
	if (!s->sleepers)
		return -1;
	uint64_t now = sched_now_ns();
	if (s->sleepers->deadline <= now)
		return 0;
	return (int64_t)(s->sleepers->deadline - now);
}

bool sched_idle(struct sched *s) { return s->busy == 0; }

int sched_free_count(struct sched *s)
{
	int k = s->n - s->busy - s->reserve;
	return k > 0 ? k : 0;
}

bool sched_in_coro(struct sched *s) { return s->current != NULL; }

static void sleep_insert(struct sched *s, struct slot *sl, uint64_t ns)
{
	sl->deadline = sched_now_ns() + ns;
	struct slot **pp = &s->sleepers;
	while (*pp && (*pp)->deadline <= sl->deadline)
		pp = &(*pp)->next;
	sl->next = *pp;
	*pp = sl;
}

void sched_sleep(struct sched *s, uint64_t ns)
{
	struct slot *sl = s->current;
	if (ns == 0) {
		push_ready(s, sl);
	} else {
		sl->state = SLOT_SLEEPING;
		sleep_insert(s, sl, ns);
	}
	coro_yield(sl->co);
}

int sched_index(const struct sched *s)
{
	return s->current ? (int)(s->current - s->slots) : -1;
}

void *sched_self(struct sched *s)
{
	s->current->unparked = false;
	return s->current;
}

void sched_park(struct sched *s)
{
	struct slot *sl = s->current;
	if (sl->unparked) {
		sl->unparked = false;
		return;
	}
	sl->state = SLOT_PARKED;
	coro_yield(sl->co);
}

bool sched_park_timeout(struct sched *s, uint64_t ns)
{
	struct slot *sl = s->current;
	if (sl->unparked) {
		sl->unparked = false;
		return true;
	}
	sl->state = SLOT_PARKED_TIMED;
	sl->timed_out = false;
	sleep_insert(s, sl, ns);
	coro_yield(sl->co);
	return !sl->timed_out;
}

void sched_unpark(struct sched *s, void *handle)
{
	struct slot *sl = handle;
	if (sl->state == SLOT_PARKED_TIMED) {
		struct slot **pp = &s->sleepers;
		while (*pp != sl)
			pp = &(*pp)->next;
		*pp = sl->next;
		sl->timed_out = false;
		push_ready(s, sl);
	} else if (sl->state == SLOT_PARKED) {
		push_ready(s, sl);
	} else {
		sl->unparked = true;
	}
}
