/*
 * sched: a worker's coroutine scheduler (DESIGN.md section 3). Coroutines
 * are Boost.Context fcontexts behind cc/coro.h; the scheduler runs the
 * ready ones round-robin from the worker's loop and parks sleepers on a
 * timer list. Owner worker thread only (_st).
 */
#ifndef RCKV_CC_SCHED_H
#define RCKV_CC_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sched;
struct coro;

typedef void (*sched_fn)(struct sched *s, void *arg);

/* Create a scheduler with a pool of `ncoro` coroutines of `stack` bytes. */
struct sched *sched_create(int ncoro, size_t stack);
void sched_destroy(struct sched *s);

/*
 * sched_spawn - run fn(arg) on a free coroutine of the pool: it starts at
 * the next sched_run. Returns 0, or -EAGAIN when every coroutine is busy.
 */
int sched_spawn(struct sched *s, sched_fn fn, void *arg);

/*
 * sched_reserve - keep k coroutines of the pool out of sched_spawn's reach
 * (and out of sched_free_count): sched_spawn_reserved alone takes them,
 * for work that must find a coroutine when every other one waits for it
 * (calvin's grant notifier, cc/calvin.c).
 */
void sched_reserve(struct sched *s, int k);
int sched_spawn_reserved(struct sched *s, sched_fn fn, void *arg);

/* Run every ready coroutine until each yields or finishes; wake sleepers
 * whose time has come first. Returns the number of coroutines run. */
int sched_run(struct sched *s);

/* Milliseconds until the next sleeper is due (-1: none; 0: some are ready). */
int sched_timeout_ms(struct sched *s);
/* The same in nanoseconds (-1: none; 0: some are ready or due). */
int64_t sched_timeout_ns(struct sched *s);

/* True when no coroutine is running, ready or sleeping. */
bool sched_idle(struct sched *s);
int sched_free_count(struct sched *s);

/*
 * From inside a coroutine of this scheduler: suspend the caller for at
 * least ns nanoseconds (0: just let the others run once). Must not be
 * called outside a coroutine.
 */
void sched_sleep(struct sched *s, uint64_t ns);
bool sched_in_coro(struct sched *s);
/* The running coroutine's place in the pool (0 .. ncoro - 1), stable for
 * the scheduler's life; -1 outside a coroutine. Unlike sched_self it
 * changes nothing (a coroutine may call it any time). */
int sched_index(const struct sched *s);

/*
 * Parking: a coroutine that waits for an event (a fabric completion) takes
 * its handle with sched_self, arranges for the event's handler to call
 * sched_unpark(s, handle), then calls sched_park. Both on the owner
 * thread. An unpark that comes before the park is remembered, so the park
 * then returns at once.
 */
void *sched_self(struct sched *s);
void sched_park(struct sched *s);
void sched_unpark(struct sched *s, void *handle);
/* sched_park, for at most ns nanoseconds: true if unparked, false if the
 * time ran out first. */
bool sched_park_timeout(struct sched *s, uint64_t ns);

/* Monotonic clock in nanoseconds. */
uint64_t sched_now_ns(void);

#endif
