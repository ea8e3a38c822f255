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

/*
 * AddressSanitizer must be told too (its fiber API): a longjmp on a
 * coroutine's stack (a Lua error inside a script, server/script_vm.c)
 * unpoisons the stack between the jump's target and the stack's top, and
 * without the switch annotations ASan takes the thread's stack for the
 * coroutine's, leaves the coroutine's redzones poisoned, and reports the
 * next write there as an overflow.
 */
#if defined(__SANITIZE_ADDRESS__)
#define RCKV_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RCKV_ASAN_FIBERS 1
#endif
#endif
/*
 * A coroutine's stack is unmapped with the redzones of the frames it left
 * still poisoned in ASan's shadow (one that never returns, or one
 * destroyed while suspended), and a later mmap at the same addresses (a
 * region, another stack) would inherit them: reads of a fresh mapping
 * reported as stack-buffer-underflows (test_cc under ASan, depending on
 * where the kernel puts the next mapping). coro_destroy unpoisons the
 * stack before it unmaps it.
 */
#ifdef RCKV_ASAN_FIBERS
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define asan_unpoison(addr, size) __asan_unpoison_memory_region(addr, size)
#else
#define asan_unpoison(addr, size) ((void)(addr), (void)(size))
#endif
#ifdef RCKV_ASAN_FIBERS
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
				     size_t *size_old);
#define asan_start_switch(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define asan_finish_switch(save, bottom_old, size_old) \
	__sanitizer_finish_switch_fiber(save, bottom_old, size_old)
#else
#define asan_start_switch(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define asan_finish_switch(save, bottom_old, size_old) \
	((void)(save), (void)(bottom_old), (void)(size_old))
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
	/* AddressSanitizer: the stacks on either side of a switch. */
	const void *stack_bottom, *caller_bottom;
	size_t stack_size, caller_size;
	void *fake_stack, *caller_fake_stack;
};

static void coro_entry(transfer_t t)
{
	struct coro *co = t.data;
	asan_finish_switch(NULL, &co->caller_bottom, &co->caller_size);
	co->caller = t.fctx;
	co->fn(co, co->arg);
	co->done = true;
	fiber_switch(co->caller_fiber);
	asan_start_switch(NULL, co->caller_bottom, co->caller_size); /* this stack ends */
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
	co->stack_bottom = (char *)co->stack + page;
	co->stack_size = stack_size;
	co->ctx = make_fcontext((char *)co->stack + co->map_len, stack_size, coro_entry);
	co->fiber = fiber_create();
	return co;
}

void coro_resume(struct coro *co)
{
	co->caller_fiber = fiber_current();
	fiber_switch(co->fiber);
	asan_start_switch(&co->caller_fake_stack, co->stack_bottom, co->stack_size);
	transfer_t t = jump_fcontext(co->ctx, co);
	asan_finish_switch(co->caller_fake_stack, NULL, NULL);
	co->ctx = t.fctx;
}

void coro_yield(struct coro *co)
{
	fiber_switch(co->caller_fiber);
	asan_start_switch(&co->fake_stack, co->caller_bottom, co->caller_size);
	transfer_t t = jump_fcontext(co->caller, NULL);
	asan_finish_switch(co->fake_stack, &co->caller_bottom, &co->caller_size);
	co->caller = t.fctx;
}

bool coro_done(const struct coro *co) { return co->done; }

void coro_destroy(struct coro *co)
{
	if (!co)
		return;
	if (co->fiber)
		fiber_destroy(co->fiber);
	asan_unpoison(co->stack_bottom, co->stack_size);
	munmap(co->stack, co->map_len);
	free(co);
}
