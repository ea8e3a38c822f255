/* Private to rdma/: the structs behind the opaque fab handles. */
#ifndef RCKV_FAB_INTERNAL_H
#define RCKV_FAB_INTERNAL_H

#include "rdma/fab.h"

struct fab_peer {
	void *base;    /* shm: the peer's mapped region; NULL if not mapped */
	uint64_t size; /* region bytes */
};

struct fab {
	struct fab_config cfg;
	const struct fab_backend *be;
	struct fab_peer peers[FAB_MAX_NODES];
};

struct fab_worker {
	struct fab *f;
	int id;
};

extern const struct fab_backend fab_shm_backend;

#endif
