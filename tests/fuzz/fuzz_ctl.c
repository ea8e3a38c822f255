/*
 * fuzz_ctl: the control plane's message checks (server/ctl_wire.c), which
 * every request a node's control thread receives passes before its handler
 * (server/cluster.c), and the walk of a KEYS/SCAN answer's key list.
 *
 * Input: a u32 message type, then the body. A body the check lets through
 * must hold what its handler reads: for HELLO, NUL-terminated strings
 * (strlen never leaves a field) and a node id below FAB_MAX_NODES. Then
 * the body is walked as a key list (and, past 8 bytes, as a SCAN answer:
 * the cursor, then keys): every key must lie inside the body, and the
 * walk must end.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/ctl_wire.h"

static void walk(const char *p, size_t len)
{
	size_t off = 0, keys = 0;
	const char *key;
	uint32_t kl;
	int r;
	while ((r = ctl_keys_next(p, len, &off, &key, &kl)) == 1) {
		if (key < p || key + kl > p + len || off > len)
			abort();
		if (++keys > len / 4 + 1)
			abort(); /* each key takes at least its 4-byte length */
	}
	if (r != 0 && off > len)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t type;
	if (size < 4)
		return 0;
	memcpy(&type, data, 4);
	size_t len = size - 4;
	char *body = malloc(len ? len : 1); /* exactly the body: reads past it are reports */
	if (!body)
		abort();
	memcpy(body, data + 4, len);

	/* Small type numbers are the real ones; others must be refused too. */
	if (ctl_request_check(type % 32, body, len) == 0 && type % 32 == CTL_HELLO) {
		const struct ctl_hello *h = (const void *)body;
		if (len != sizeof(*h) || h->node >= FAB_MAX_NODES)
			abort();
		if (strlen(h->region_path) >= sizeof(h->region_path) ||
		    strlen(h->backend) >= sizeof(h->backend) ||
		    strlen(h->proto) >= sizeof(h->proto) ||
		    strlen(h->fabric_addr) >= sizeof(h->fabric_addr))
			abort();
	}
	walk(body, len);
	if (len >= 8)
		walk(body + 8, len - 8);
	free(body);
	return 0;
}
