/*
 * coro.c: coroutines over Boost.Context's C-callable fcontext primitives.
 * Only the two assembly entry points of libboost_context.a are used; they
 * have C linkage, so we declare them here rather than include C++ headers.
 */
#include "cc/coro.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef void *fcontext_t;
typedef struct {
	fcontext_t fctx;
	void *data;
} transfer_t;

extern transfer_t jump_fcontext(fcontext_t const to, void *vp);
extern fcontext_t make_fcontext(void *sp, size_t size, void (*fn)(transfer_t));

/*
 * ThreadSanitizer must be told about stack switches (its fiber API), or it
 * mixes up the histories of coroutines that share a thread. These helpers
 * compile to nothing in other builds.
 */
#if defined(__SANITIZE_THREAD__)
#define RCKV_TSAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RCKV_TSAN_FIBERS 1
#endif
#endif
#ifdef RCKV_TSAN_FIBERS
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
static inline void *fiber_create(void) { return __tsan_create_fiber(0); }
static inline void fiber_destroy(void *f) { __tsan_destroy_fiber(f); }
static inline void *fiber_current(void) { return __tsan_get_current_fiber(); }
static inline void fiber_switch(void *f) { __tsan_switch_to_fiber(f, 0); }
#else
static inline void *fiber_create(void) { return NULL; }
static inline void fiber_destroy(void *f) { (void)f; }
static inline void *fiber_current(void) { return NULL; }
static inline void fiber_switch(void *f) { (void)f; }
#endif

struct coro {
	fcontext_t ctx;    /* where to jump to resume the coroutine */
	fcontext_t caller; /* where to jump to yield back */
	coro_fn fn;
	void *arg;
	bool done;
	void *stack;       /* mapping base (guard page included) */
	size_t map_len;
	void *fiber;       /* ThreadSanitizer's fiber of this coroutine */
	void *caller_fiber;
};

static void coro_entry(transfer_t t)
{
	struct coro *co = t.data;
	co->caller = t.fctx;
	co->fn(co, co->arg);
	co->done = true;
	fiber_switch(co->caller_fiber);
	jump_fcontext(co->caller, NULL);
	abort(); /* a finished coroutine is never resumed (coro.h) */
}

struct coro *coro_create(size_t stack_size, coro_fn fn, void *arg)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	stack_size = (stack_size + page - 1) & ~(page - 1);
	struct coro *co = calloc(1, sizeof(*co));
	if (!co)
		return NULL;
	co->map_len = stack_size + page;
	co->stack = mmap(NULL, co->map_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (co->stack == MAP_FAILED) {
		free(co);
		return NULL;
	}
	/* Guard page at the low end: stacks grow down, an overflow faults. */
	mprotect(co->stack, page, PROT_NONE);
	co->fn = fn;
	co->arg = arg;
	co->ctx = make_fcontext((char *)co->stack + co->map_len, stack_size, coro_entry);
	co->fiber = fiber_create();
	return co;
}

void coro_resume(struct coro *co)
{
	co->caller_fiber = fiber_current();
	fiber_switch(co->fiber);
	transfer_t t = jump_fcontext(co->ctx, co);
	co->ctx = t.fctx;
}

void coro_yield(struct coro *co)
{
	fiber_switch(co->caller_fiber);
	transfer_t t = jump_fcontext(co->caller, NULL);
	co->caller = t.fctx;
}

bool coro_done(const struct coro *co) { return co->done; }

void coro_destroy(struct coro *co)
{
	if (!co)
		return;
	if (co->fiber)
		fiber_destroy(co->fiber);
	munmap(co->stack, co->map_len);
	free(co);
}
