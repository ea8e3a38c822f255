/*
 * node.c: the CC layer's node (cc/node.h): its setup, its log hook, and
 * placement reads on behalf of workers.
 */
#include "cc/node.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cc/calvin.h"
#include "cc/exec_internal.h"

int cc_node_init(struct cc_node *n, uint16_t id, struct pl_map *first)
{
	memset(n, 0, sizeof(*n));
	n->id = id;
	n->max_node_id = id;
	pthread_mutex_init(&n->switch_lock, NULL);
	if (pl_table_init(&n->place, first) != 0) {
		pthread_mutex_destroy(&n->switch_lock);
		return -ENOMEM;
	}
	n->limits.calvin_epoch_us = CALVIN_EPOCH_US_DEFAULT;
	if (calvin_create(n) != 0) {
		pl_table_destroy(&n->place);
		pthread_mutex_destroy(&n->switch_lock);
		return -ENOMEM;
	}
	return 0;
}

void cc_node_destroy(struct cc_node *n)
{
	calvin_destroy(n);
	pl_table_destroy(&n->place);
	pthread_mutex_destroy(&n->switch_lock);
}

unsigned cc_peer_restarted(struct cc_node *n, uint16_t peer)
{
	calvin_peer_failed(n, peer); /* whatever the protocol: its queues may still hold some */
	const struct cc_protocol *p = ck_pr_load_ptr(&n->proto);
	return p && p->peer_restarted ? p->peer_restarted(n, peer) : 0;
}

void cc_log(struct cc_node *n, int level, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n->log)
		n->log(n, level, line);
	else
		fprintf(stderr, "rckv node %u: %s\n", (unsigned)n->id, line);
}

uint16_t cc_key_node(struct cc_worker *ccw, const char *key, size_t klen)
{
	/* The caller's section (cc_enter) keeps the map alive. */
	const struct pl_map *m = ck_pr_load_ptr(&ccw->node->place.cur);
	if (m->nnodes <= 1)
		return m->nodes[0];
	return pl_primary(m, key, klen);
}

const struct pl_set *cc_key_set(struct cc_worker *ccw, const char *key, size_t klen)
{
	const struct pl_map *m = ck_pr_load_ptr(&ccw->node->place.cur);
	return m->replicas > 1 ? pl_slot_set(m, pl_keyslot(key, klen)) : NULL;
}

const struct pl_map *cc_placement_begin(struct cc_worker *ccw)
{
	return pl_read_begin(&ccw->node->place, ccw->place_rec);
}

void cc_placement_end(struct cc_worker *ccw)
{
	pl_read_end(ccw->place_rec);
}
