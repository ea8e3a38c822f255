/*
 * rpc_handlers.h: the RPC handlers the fabric conformance tests register
 * on every backend (test_fabric: shm and tcp; test_verbs_wire: verbs on
 * the fake NIC), so each backend is held to the same replies. Included by
 * one test program each; every handler runs on the target's worker.
 */
#ifndef RCKV_TEST_RPC_HANDLERS_H
#define RCKV_TEST_RPC_HANDLERS_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "rdma/fab.h"

/* h_add's request: FAA `add` onto the word at `off`. */
struct rpc_add_req {
	uint64_t off, add;
};

/* FAA on the target's own region, through its worker's fabric (what a
 * stage's handler does: the same words as the one-sided verbs; on verbs
 * the loopback QP); replies the old value. */
static int h_add(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)arg;
	struct rpc_add_req rq;
	if (c->len != sizeof(rq) || c->cap < 8)
		return -EINVAL;
	memcpy(&rq, c->req, sizeof(rq));
	struct fab_batch b;
	fab_batch_init(&b, c->fw, (struct fab_waiter){ 0 }, NULL);
	uint64_t old = 0;
	int rc = fab_faa1(&b, c->to, rq.off, rq.add, &old);
	if (rc)
		return rc;
	memcpy(c->resp, &old, 8);
	*len = 8;
	return 0;
}

/* A handler that fails: its -errno is the call's status. */
static int h_fail(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)arg, (void)c, (void)len;
	return -EPERM;
}

/* Replies the request (status 7); a request longer than the reply buffer
 * makes the fabric answer -EMSGSIZE. */
static int h_echo(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	(void)arg;
	memcpy(c->resp, c->req, c->len < c->cap ? c->len : c->cap);
	*len = c->len;
	return 7;
}

#endif
