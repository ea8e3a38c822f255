/*
 * coro: stackful coroutines on Boost.Context's fcontext (make_fcontext /
 * jump_fcontext, about 5 ns a switch). Stacks come from mmap with a guard
 * page below them. The interface is tiny on purpose (STYLE.md): create,
 * resume, yield, destroy; the coroutine is always passed explicitly.
 * A coroutine belongs to the thread that resumes it.
 */
#ifndef RCKV_CC_CORO_H
#define RCKV_CC_CORO_H

#include <stdbool.h>
#include <stddef.h>

struct coro;
typedef void (*coro_fn)(struct coro *co, void *arg);

/* Create a suspended coroutine that will run fn(co, arg) at its first
 * resume. Returns NULL on allocation failure. */
struct coro *coro_create(size_t stack_size, coro_fn fn, void *arg);
/* Run co until it yields or returns. Not from inside co itself. */
void coro_resume(struct coro *co);
/* From inside co: return control to whoever resumed it. */
void coro_yield(struct coro *co);
/* True once fn has returned; a finished coroutine must not be resumed. */
bool coro_done(const struct coro *co);
void coro_destroy(struct coro *co);

#endif
