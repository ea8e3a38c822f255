/*
 * srv: starting and stopping a node (server/node.c). Several nodes may run
 * in one process (tests); each is a struct node owned by its creator.
 */
#ifndef RCKV_SRV_SRV_H
#define RCKV_SRV_SRV_H

#include <stddef.h>

struct node;

/*
 * srv_node_start - with n->cfg filled: open the log, map and recover the
 * region, set up the fabric and the protocol, listen, start the workers.
 * Returns 0, or -1 with a one-line reason in err (nothing left running).
 */
int srv_node_start(struct node *n, char *err, size_t errlen);

/* Ask the node to stop (SHUTDOWN, signals): any thread. */
void srv_request_shutdown(struct node *n);

/* Copy the options cc reads while it runs (max-key-bytes, max-value-bytes,
 * txn-timeout, mvcc-versions, maat-list-slots, testing) into n->cc.limits: at start, and
 * after every CONFIG SET. Any thread. */
void srv_node_limits(struct node *n);
/* How persistence power makes commits durable on this node (INFO, log). */
const char *srv_durable_path(struct node *n);

/* Stop the workers, close the region cleanly, free everything. */
void srv_node_stop(struct node *n);

#endif
