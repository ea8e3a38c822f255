/*
 * switch: node-wide quiesce, used by the online protocol switch and by
 * FLUSHALL/FLUSHDB (DESIGN.md section 6, "Switching protocol").
 */
#ifndef RCKV_CC_SWITCH_H
#define RCKV_CC_SWITCH_H

#include <stddef.h>

struct node;
struct worker;

/*
 * cc_quiesce_run - hold new transactions, wait (yielding the calling
 * coroutine on w's scheduler) until none is in flight on the node, run
 * fn(n, arg) with the node quiet, then let transactions resume. The caller
 * must not be inside a transaction. Returns what fn returns.
 */
int cc_quiesce_run(struct node *n, struct worker *w, int (*fn)(struct node *n, void *arg),
		   void *arg);

/*
 * cc_switch - switch the node to protocol `name` online: quiesce, reset
 * item metadata for the new protocol, publish it, bump the epoch, resume.
 * Returns 0, or -EINVAL with err filled ("unknown protocol 'x'", or a
 * protocol that needs `testing yes`).
 */
int cc_switch(struct node *n, struct worker *w, const char *name, char *err, size_t errlen);

/* Names of the protocols CONFIG SET cc accepts on this node, NULL-terminated. */
const char *const *cc_protocol_names(const struct node *n);

#endif
