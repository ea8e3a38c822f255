/*
 * slots: the cluster's members as clients and peers reach them (DESIGN.md
 * section 7): id, client address, fabric address. Which node holds which
 * key is placement's (placement/placement.h, held in node->cc.place); this
 * is only who the members are and where they listen.
 */
#ifndef RCKV_SRV_SLOTS_H
#define RCKV_SRV_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "placement/placement.h"

#define SLOT_COUNT PL_SLOTS
#define SLOT_MAX_NODES PL_MAX_NODES

struct slot_node {
	int id;                 /* node id, 1..63 */
	char host[64];          /* client address */
	int port;               /* client port */
	char fabric_addr[128];  /* fabric address (host:port for tcp/verbs; "" for shm) */
};

/* Immutable once published; replaced whole (never edited in place). */
struct slot_map {
	int nnodes;
	struct slot_node nodes[SLOT_MAX_NODES]; /* ascending ids */
};

/* A map of one member, `id` (a standalone node). */
void slot_map_single(struct slot_map *m, int id, const char *host, int port);

/* The placement of the members of m: slots spread evenly in id order,
 * each slot on `replicas` consecutive members (its primary first). NULL
 * if out of memory or replicas is out of 1..min(members, PL_MAX_REPLICAS). */
struct pl_map *slot_map_placement(const struct slot_map *m, int replicas, uint64_t epoch);

#endif
