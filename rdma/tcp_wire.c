/*
 * tcp_wire.c: encoding and decoding of the tcp fabric's frames.
 */
#include "rdma/tcp_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>

void tcp_hello_encode(struct tcp_hello *h, uint16_t type, uint16_t from, uint16_t worker)
{
	memcpy(h->magic, TCP_HELLO_MAGIC, 8);
	h->type = type;
	h->from = from;
	h->worker = worker;
	h->reserved = 0;
}

int tcp_hello_check(const struct tcp_hello *h)
{
	if (memcmp(h->magic, TCP_HELLO_MAGIC, 8) != 0)
		return -EPROTO;
	if (h->type != TCP_HELLO_DATA && h->type != TCP_HELLO_CTL)
		return -EPROTO;
	if (h->from >= FAB_MAX_NODES)
		return -EPROTO;
	return 0;
}

size_t tcp_request_size(struct fab_op *const *ops, int n)
{
	size_t size = 8 + (size_t)n * sizeof(struct tcp_wire_op);
	for (int i = 0; i < n; i++)
		if (ops[i]->kind == FAB_WRITE || ops[i]->kind == FAB_RPC)
			size += ops[i]->len;
	return size;
}

void tcp_request_encode(char *q, struct fab_op *const *ops, int n)
{
	uint32_t flen = (uint32_t)(tcp_request_size(ops, n) - 4);
	uint32_t nops = (uint32_t)n;
	memcpy(q, &flen, 4);
	memcpy(q + 4, &nops, 4);
	char *w = q + 8;
	char *payload = w + (size_t)n * sizeof(struct tcp_wire_op);
	for (int i = 0; i < n; i++) {
		const struct fab_op *op = ops[i];
		struct tcp_wire_op wo = { .kind = op->kind, .len = op->len, .off = op->off,
					  .cmp = op->cmp, .swp = op->swp };
		wo.pad[0] = op->flags & FAB_OP_FLUSH;
		if (op->kind == FAB_RPC)
			wo.cmp = op->rep->cap;
		memcpy(w, &wo, sizeof(wo));
		w += sizeof(wo);
		if ((op->kind == FAB_WRITE || op->kind == FAB_RPC) && op->len) {
			memcpy(payload, op->buf, op->len);
			payload += op->len;
		}
	}
}

int tcp_request_decode(const char *q, uint32_t flen, struct fab_op *ops, uint32_t nops,
		       uint32_t *resp)
{
	size_t head = 4 + (size_t)nops * sizeof(struct tcp_wire_op);
	if (head > flen)
		return -EPROTO;
	const char *w = q + 8;
	const char *payload = q + 4 + head;
	const char *end = q + 4 + flen;
	uint64_t r = 0; /* 64-bit: a malformed request must not wrap the sum */
	bool rpc = false;
	for (uint32_t i = 0; i < nops; i++) {
		struct tcp_wire_op wo;
		memcpy(&wo, w + (size_t)i * sizeof(wo), sizeof(wo));
		if (wo.kind >= FAB_KINDS || (wo.len == 0 && wo.kind != FAB_RPC))
			return -EPROTO;
		if (wo.pad[0] & ~FAB_OP_FLUSH || (wo.pad[0] && wo.kind != FAB_READ))
			return -EPROTO;
		/* Reserved bytes are 0 (a frame that decodes encodes back to
		 * itself: tests/fuzz/fuzz_tcp_wire.c) */
		if (wo.pad[1] || wo.pad[2])
			return -EPROTO;
		/* RPCs end a frame (fab_exec's phases): none, or only RPCs, after one */
		if (rpc && wo.kind != FAB_RPC)
			return -EPROTO;
		ops[i] = (struct fab_op){ .kind = wo.kind, .flags = wo.pad[0], .len = wo.len,
					  .off = wo.off, .cmp = wo.cmp, .swp = wo.swp };
		if (wo.kind == FAB_RPC) {
			if (wo.len > FAB_RPC_MAX || wo.off >= FAB_RPC_HANDLERS || wo.cmp > FAB_RPC_MAX ||
			    (size_t)(end - payload) < wo.len)
				return -EPROTO;
			rpc = true;
			ops[i].buf = (void *)payload;
			payload += wo.len;
		} else if (wo.kind == FAB_WRITE) {
			if ((size_t)(end - payload) < wo.len)
				return -EPROTO;
			ops[i].buf = (void *)payload;
			payload += wo.len;
		} else if (wo.kind == FAB_READ) {
			r += wo.len;
		} else {
			if (wo.len != 8)
				return -EPROTO;
			r += 8;
		}
	}
	if (payload != end || r > UINT32_MAX - 8)
		return -EPROTO;
	*resp = (uint32_t)r;
	return 0;
}

int tcp_response_decode(const char *payload, size_t plen, struct fab_op *const *ops, int n)
{
	const char *end = payload + plen;
	for (int i = 0; i < n; i++) {
		struct fab_op *op = ops[i];
		if (op->kind == FAB_WRITE)
			continue;
		if (op->kind == FAB_RPC) {
			int32_t status;
			uint32_t len;
			if (end - payload < 8)
				return -EPROTO;
			memcpy(&status, payload, 4);
			memcpy(&len, payload + 4, 4);
			payload += 8;
			if (len > op->rep->cap || (size_t)(end - payload) < len || (status < 0 && len))
				return -EPROTO;
			if (len) /* buf may be NULL with cap 0 */
				memcpy(op->rep->buf, payload, len);
			op->rep->status = status;
			op->rep->len = len;
			payload += len;
			continue;
		}
		uint32_t len = op->kind == FAB_READ ? op->len : 8;
		if ((size_t)(end - payload) < len)
			return -EPROTO;
		if (op->kind == FAB_READ)
			memcpy(op->buf, payload, len);
		else if (op->old)
			memcpy(op->old, payload, 8);
		payload += len;
	}
	return payload == end ? 0 : -EPROTO;
}

void ioctl_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}
