/*
 * pubsub_cluster.c: PUBLISH across the cluster, on the fabric's two-sided
 * RPC (DESIGN.md section 8).
 *
 * The publishing node delivers to its own subscribers (ps_publish_local),
 * then sends one SRV_RPC_PUBLISH request to every other node in one batch
 * and waits for the replies on its coroutine (the worker runs other
 * coroutines meanwhile). Each target's handler runs ps_publish_local on
 * the worker that polled the request, which only pushes onto inboxes and
 * never blocks, and replies with its receivers; PUBLISH answers the sum.
 *
 * Why the RPC and not the control channel (server/cluster.c): a message is
 * a hot-path event with a small payload and a reply, which is what the
 * fabric's RPC is built for (batched with others, polled by the workers,
 * on every backend); the control channel is a TCP connection per node pair
 * served by a control thread, for rare cluster-wide operations.
 *
 * Invariants:
 *  (1) Order per publisher: a client's commands run one after the other
 *      on its coroutine, and a PUBLISH returns only after every target
 *      node pushed the message onto its workers' inboxes (pubsub.c,
 *      invariant (1)); so its next message reaches every inbox after this
 *      one. (Two RPCs in flight to one node may run in any order (fab.h),
 *      which is why nothing is pipelined here.)
 *  (2) A node that does not answer (down, fenced) counts no receivers and
 *      fails nothing: Pub/Sub is fire-and-forget, as in Redis.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc/exec.h"
#include "rdma/fab.h"
#include "server/log.h"
#include "server/node.h"
#include "server/pubsub.h"
#include "server/worker.h"

/* The request: this header, the channel's bytes, the message's. */
struct pub_req {
	uint32_t kind;
	uint32_t clen;
	uint32_t mlen;
};

#define PUB_MAX (FAB_RPC_MAX - sizeof(struct pub_req))

static int h_publish(void *arg, struct fab_rpc_call *c, uint32_t *len)
{
	struct node *n = arg;
	struct pub_req rq;
	if (c->len < sizeof(rq) || c->cap < sizeof(int64_t))
		return -EINVAL;
	memcpy(&rq, c->req, sizeof(rq));
	if ((uint64_t)rq.clen + rq.mlen + sizeof(rq) != c->len ||
	    (rq.kind != PS_CHANNEL && rq.kind != PS_SHARD))
		return -EINVAL;
	const char *ch = (const char *)c->req + sizeof(rq);
	int wid = fab_worker_id(c->fw);
	struct worker *self = wid >= 0 && wid < n->nworkers ? n->workers[wid] : NULL;
	int64_t count = n->pubsub ? ps_publish_local(n, self, (int)rq.kind, ch, rq.clen,
						     ch + rq.clen, rq.mlen)
				  : 0;
	if (count < 0)
		return (int)count;
	memcpy(c->resp, &count, sizeof(count));
	*len = sizeof(count);
	return 0;
}

int ps_cluster_attach(struct node *n, char *err, size_t errlen)
{
	if (fab_rpc_register(n->cc.fab, SRV_RPC_PUBLISH, "publish", h_publish, n) != 0) {
		snprintf(err, errlen, "pubsub: cannot register RPC handler publish");
		return -EINVAL;
	}
	return 0;
}

long long ps_cluster_publish(struct node *n, struct worker *w, int kind, const char *ch,
			     size_t clen, const char *msg, size_t mlen)
{
	if (clen + mlen > PUB_MAX)
		return -EMSGSIZE;
	long long total = ps_publish_local(n, w, kind, ch, clen, msg, mlen);
	if (total < 0)
		return total;
	int np = n->cfg.ncluster_nodes;
	if (np <= 1)
		return total;
	size_t rlen = sizeof(struct pub_req) + clen + mlen;
	char stack[512];
	char *req = rlen <= sizeof(stack) ? stack : malloc(rlen);
	if (!req)
		return -ENOMEM;
	struct pub_req rq = { .kind = (uint32_t)kind, .clen = (uint32_t)clen,
			      .mlen = (uint32_t)mlen };
	memcpy(req, &rq, sizeof(rq));
	memcpy(req + sizeof(rq), ch, clen);
	memcpy(req + sizeof(rq) + clen, msg, mlen);

	int64_t counts[SRV_MAX_CLUSTER_NODES];
	struct fab_rpc_reply rr[SRV_MAX_CLUSTER_NODES];
	struct fab_batch b;
	cc_batch_init(&b, w->ccw, NULL);
	int sent = 0;
	for (int i = 0; i < np; i++) {
		int id = n->cfg.cluster_nodes[i].id;
		if (id == n->cfg.node_id)
			continue;
		counts[i] = 0;
		rr[i] = (struct fab_rpc_reply){ .buf = &counts[i], .cap = sizeof(counts[i]) };
		fab_rpc(&b, (uint16_t)id, SRV_RPC_PUBLISH, req, (uint32_t)rlen, &rr[i]);
		sent++;
	}
	if (sent)
		(void)fab_exec(&b); /* each reply's status says (invariant (2)) */
	for (int i = 0; i < np; i++) {
		if (n->cfg.cluster_nodes[i].id == n->cfg.node_id)
			continue;
		if (rr[i].status >= 0 && rr[i].len == sizeof(counts[i]) && counts[i] > 0)
			total += counts[i];
	}
	if (req != stack)
		free(req);
	return total;
}
