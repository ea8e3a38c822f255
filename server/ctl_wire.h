/*
 * ctl_wire: the control plane's messages (server/cluster.c) and the checks
 * every one of them passes before a handler reads it, kept apart so that
 * they are tested and fuzzed without sockets (tests/fuzz/fuzz_ctl.c).
 *
 * A request is a ctl_req_hdr then `len` bytes of body; the answer a
 * ctl_resp_hdr then its body. Fixed layouts, little-endian, between nodes
 * of the same build (the HELLO magic names the region layout version).
 *
 * Threads: pure functions.
 */
#ifndef RCKV_SRV_CTL_WIRE_H
#define RCKV_SRV_CTL_WIRE_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "rdma/fab.h"
#include "server/recovery.h"
#include "storage/st.h"

enum ctl_type {
	CTL_HELLO = 1,
	CTL_FAB,
	CTL_QUIESCE,
	CTL_SWITCH,
	CTL_RESUME,
	CTL_FLUSH,
	CTL_COUNT,
	CTL_KEYS,
	CTL_SCAN,
	CTL_SETTLED,
	CTL_SETTLE,
	CTL_TAKE_SCAN,
	CTL_TAKE_SETTLE,
	CTL_STAGES,
	CTL_SAVE,    /* save this node's region (SAVE, BGSAVE); answer: an error's text,
		      * after CTL_PROGRESS frames while it saves (serve_save) */
};

/* A response status that is not the answer: the request is still being
 * served, and the answer (or another CTL_PROGRESS) follows. No body. Only
 * CTL_SAVE's keepalive sends it; real statuses are 0 or -errno. */
#define CTL_PROGRESS 1

#define CTL_MAX_PAYLOAD (64u << 20)
/* The last digit follows the region layout version (storage/st.h): peers
 * compute block sizes and slot words of each other's regions, so nodes of
 * builds with other size classes refuse each other's HELLO. */
#define CTL_HELLO_MAGIC "RCKVCTL3"
static_assert(ST_LAYOUT_VERSION == 3, "CTL_HELLO_MAGIC names the layout version");

struct ctl_req_hdr {
	uint32_t type;
	uint32_t len;
};

struct ctl_resp_hdr {
	int32_t status;
	uint32_t len;
};

/* What nodes tell each other at join. Fixed layout, little-endian. */
struct ctl_hello {
	char magic[8];
	uint64_t cluster_id;
	uint32_t node;
	uint32_t reserved;
	uint64_t incarnation;
	uint64_t region_size;
	struct st_layout layout;
	char region_path[256];
	char backend[16];
	char proto[32];
	char fabric_addr[128];
	/* The undo log (server/recovery.c): the sender's decision records, and
	 * its slots whose records the receiver must settle (txn, or 0). */
	uint64_t decided[ST_LOG_SLOTS];
	struct srv_pending pending;
};

/* CTL_SETTLED: the sender settled what the receiver reported to it. */
struct ctl_settled {
	uint64_t node;
	struct srv_pending done;
};

/* CTL_SETTLE: outside a join, what the sender (a live coordinator) left on
 * the receiver, with its decision records: the receiver settles it and
 * answers; the sender then frees those entries (settler_main). */
struct ctl_settle {
	uint64_t node;
	uint64_t decided[ST_LOG_SLOTS];
	struct srv_pending pending;
};

/* CTL_TAKE_SCAN asks for a dead coordinator's log slots on the receiver
 * (answer: txn[] then mark[]); CTL_TAKE_SETTLE has them settled there with
 * the decisions the survivors' marks give (cluster_takeover). */
struct ctl_take {
	uint64_t dead;
	uint64_t decided[ST_LOG_SLOTS];
};

/*
 * ctl_request_check - may the body of a request of this type reach its
 * handler? The fixed-size messages must have their size; HELLO must also
 * carry the magic, a node id below FAB_MAX_NODES and NUL-terminated
 * strings (ctl_hello_check); SETTLE, SETTLED, TAKE_SCAN and TAKE_SETTLE a
 * node id below FAB_MAX_NODES; STAGES 4 bytes; SCAN at least its cursor
 * and count. Other types take any body (a protocol name, a pattern, a
 * backend's message that its own decoder checks). Returns 0 or -EPROTO.
 */
int ctl_request_check(uint32_t type, const void *body, size_t len);

/* The checks of a HELLO, or of the HELLO a peer answers with. 0 or -EPROTO. */
int ctl_hello_check(const void *body, size_t len);

/*
 * ctl_keys_next - the next key of a KEYS or SCAN answer's key list (each key
 * a u32 length then its bytes), starting at *off (0 first).
 * Returns 1 with *key, *klen set and *off moved past it; 0 at the end of
 * the list; -EPROTO if a length runs past the end (the walk stops there).
 */
int ctl_keys_next(const char *p, size_t len, size_t *off, const char **key, uint32_t *klen);

#endif
