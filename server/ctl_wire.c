/*
 * ctl_wire.c: the control messages' checks (ctl_wire.h).
 */
#include "server/ctl_wire.h"

#include <errno.h>
#include <string.h>

static_assert(sizeof(struct ctl_req_hdr) == 8, "request header is 8 bytes");
static_assert(sizeof(struct ctl_resp_hdr) == 8, "response header is 8 bytes");

/* A string field of n bytes must end within them. */
static int terminated(const char *s, size_t n)
{
	return memchr(s, '\0', n) != NULL;
}

int ctl_hello_check(const void *body, size_t len)
{
	struct ctl_hello h;
	if (len != sizeof(h))
		return -EPROTO;
	memcpy(&h, body, sizeof(h));
	if (memcmp(h.magic, CTL_HELLO_MAGIC, 8) != 0 || h.node >= FAB_MAX_NODES)
		return -EPROTO;
	if (!terminated(h.region_path, sizeof(h.region_path)) ||
	    !terminated(h.backend, sizeof(h.backend)) || !terminated(h.proto, sizeof(h.proto)) ||
	    !terminated(h.fabric_addr, sizeof(h.fabric_addr)))
		return -EPROTO;
	return 0;
}

/* The node id at the start of a fixed-size message of `size` bytes. */
static int node_first(const void *body, size_t len, size_t size)
{
	uint64_t node;
	if (len != size)
		return -EPROTO;
	memcpy(&node, body, sizeof(node));
	return node < FAB_MAX_NODES ? 0 : -EPROTO;
}

int ctl_request_check(uint32_t type, const void *body, size_t len)
{
	switch (type) {
	case CTL_HELLO:
		return ctl_hello_check(body, len);
	case CTL_SETTLE:
		return node_first(body, len, sizeof(struct ctl_settle));
	case CTL_SETTLED:
		return node_first(body, len, sizeof(struct ctl_settled));
	case CTL_TAKE_SCAN:
	case CTL_TAKE_SETTLE:
		return node_first(body, len, sizeof(struct ctl_take));
	case CTL_STAGES:
		return len == sizeof(uint32_t) ? 0 : -EPROTO;
	case CTL_SCAN: /* cursor, count, filter, then the pattern */
		return len >= 3 * sizeof(uint64_t) ? 0 : -EPROTO;
	default:
		return 0;
	}
}

int ctl_keys_next(const char *p, size_t len, size_t *off, const char **key, uint32_t *klen)
{
	uint32_t kl;
	if (*off >= len)
		return 0;
	if (len - *off < 4)
		return -EPROTO;
	memcpy(&kl, p + *off, 4);
	if (len - *off - 4 < kl)
		return -EPROTO;
	*key = p + *off + 4;
	*klen = kl;
	*off += 4 + (size_t)kl;
	return 1;
}
