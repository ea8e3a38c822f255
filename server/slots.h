/*
 * slots: keys to slots to nodes (DESIGN.md section 7). A key maps to one of
 * 16384 slots with Redis Cluster's function: CRC16 (XMODEM) of the key, or
 * of the part between the first '{' and the next '}' when that part is not
 * empty (a hash tag), modulo 16384. The slot map says which node owns each
 * slot.
 */
#ifndef RCKV_SRV_SLOTS_H
#define RCKV_SRV_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#define SLOT_COUNT 16384
#define SLOT_MAX_NODES 64

struct slot_node {
	int id;                 /* node id, 1..63 */
	char host[64];          /* client address */
	int port;               /* client port */
	char fabric_addr[128];  /* fabric address (host:port for tcp/verbs; "" for shm) */
};

/* Immutable once published; replaced whole (never edited in place). */
struct slot_map {
	int nnodes;
	struct slot_node nodes[SLOT_MAX_NODES];
	uint8_t owner[SLOT_COUNT]; /* index into nodes[] */
};

uint16_t slot_crc16(const char *buf, size_t len);
/* The slot of a key (hash tags honoured). */
unsigned slot_of_key(const char *key, size_t len);

/* A map where node `self` owns every slot (a standalone node). */
void slot_map_single(struct slot_map *m, int id, const char *host, int port);
/* Spread the slots evenly over the map's nodes, in order of nodes[]. */
void slot_map_spread(struct slot_map *m);
/* The node owning a key, as an index into nodes[]. */
static inline int slot_map_node_of(const struct slot_map *m, const char *key, size_t len)
{
	return m->owner[slot_of_key(key, len)];
}

#endif
