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

struct coro {
	fcontext_t ctx;    /* where to jump to resume the coroutine */
	fcontext_t caller; /* where to jump to yield back */
	coro_fn fn;
	void *arg;
	bool done;
	void *stack;       /* mapping base (guard page included) */
	size_t map_len;
};

static void coro_entry(transfer_t t)
{
	struct coro *co = t.data;
	co->caller = t.fctx;
	co->fn(co, co->arg);
	co->done = true;
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
	return co;
}

void coro_resume(struct coro *co)
{
	transfer_t t = jump_fcontext(co->ctx, co);
	co->ctx = t.fctx;
}

void coro_yield(struct coro *co)
{
	transfer_t t = jump_fcontext(co->caller, NULL);
	co->caller = t.fctx;
}

bool coro_done(const struct coro *co) { return co->done; }

void coro_destroy(struct coro *co)
{
	if (!co)
		return;
	munmap(co->stack, co->map_len);
	free(co);
}
