/*
 * latency: Redis's latency monitor (LATENCY LATEST / HISTORY / RESET /
 * DOCTOR / HELP) for the events rckv has: "command" and "fast-command"
 * (a command slower than latency-monitor-threshold ms), "cc-switch" (an
 * online protocol switch: the cluster's quiesce pause), "fabric-wait" (a
 * transaction's fabric round trip that waited the threshold or more: cc
 * tells it through cc_node.on_fabric_wait), and "recovery" (the recovery
 * of the MemStore at start).
 *
 * Threads: any; the samples are the node's, under their own mutex, taken
 * only for an event over the threshold (one relaxed load otherwise).
 */
#ifndef RCKV_SRV_LATENCY_H
#define RCKV_SRV_LATENCY_H

#include <stdint.h>

struct node;

int latency_create(struct node *n);
void latency_destroy(struct node *n);

/* Record ms for event if latency-monitor-threshold is on and ms reaches
 * it. Any thread. */
void latency_add(struct node *n, const char *event, uint64_t ms);

/* The threshold in ms, 0 when off (one relaxed load). */
uint64_t latency_threshold(struct node *n);

#endif
