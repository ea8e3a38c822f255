/*
 * slots.c: the cluster's members, and the placement they start with.
 */
#include "server/slots.h"

#include <stdio.h>
#include <string.h>

void slot_map_single(struct slot_map *m, int id, const char *host, int port)
{
	memset(m, 0, sizeof(*m));
	m->nnodes = 1;
	m->nodes[0].id = id;
	snprintf(m->nodes[0].host, sizeof(m->nodes[0].host), "%s", host);
	m->nodes[0].port = port;
}

struct pl_map *slot_map_placement(const struct slot_map *m, int replicas, uint64_t epoch)
{
	uint16_t ids[SLOT_MAX_NODES];
	for (int i = 0; i < m->nnodes; i++)
		ids[i] = (uint16_t)m->nodes[i].id;
	return pl_map_spread(ids, m->nnodes, replicas, epoch);
}
