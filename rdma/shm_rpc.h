/*
 * shm_rpc: two-sided RPC between the nodes of one host (the shm backend's
 * fab_rpc; see shm_rpc.c). Private to rdma/.
 */
#ifndef RCKV_SHM_RPC_H
#define RCKV_SHM_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "rdma/fab_internal.h"

/* Create the own rings' file (fab_config.region_path names it); without a
 * region path, this node takes no RPCs. */
int shm_rpc_attach_self(struct fab *f, char *err, size_t errlen);
/* Map a peer's rings (its new incarnation, at a rejoin). A peer without
 * them takes no RPCs from us; not an error. */
void shm_rpc_attach_peer(struct fab *f, const struct fab_peer_info *pi);
void shm_rpc_close(struct fab *f);

int shm_rpc_worker_init(struct fab_worker *fw, char *err, size_t errlen);
void shm_rpc_worker_fini(struct fab_worker *fw);
int shm_rpc_worker_fds(struct fab_worker *fw, int *fds, int max);
int shm_rpc_poll(struct fab_worker *fw);
int shm_rpc_post(struct fab_worker *fw, struct fab_part *part);
void shm_rpc_fence(struct fab *f, uint16_t node);
void shm_rpc_peer_back(struct fab *f, uint16_t node);

#endif
