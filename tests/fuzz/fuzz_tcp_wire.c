/*
 * fuzz_tcp_wire: the tcp fabric's frames (rdma/tcp_wire.c), as the NIC
 * thread and an endpoint receive them from a peer.
 *
 * Input: a 16-byte hello, then a request frame (u32 flen, u32 nops, ops,
 * payload), then whatever follows as the payload of a response to it.
 * The request is decoded under the checks nic_serve makes before it
 * (1 <= nops <= FAB_BATCH_MAX, the whole frame arrived); a frame that
 * decodes must encode back to the same bytes (tcp_request_encode), and its
 * WRITE and RPC payloads must lie inside the frame. The response is then
 * decoded into buffers of exactly the sizes the request asked for, so a
 * copy past one is an ASan report.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/fab.h"
#include "rdma/tcp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tcp_hello h;
	if (size < sizeof(h) + 8)
		return 0;
	memcpy(&h, data, sizeof(h));
	(void)tcp_hello_check(&h);
	data += sizeof(h);
	size -= sizeof(h);

	uint32_t flen, nops;
	memcpy(&flen, data, 4);
	memcpy(&nops, data + 4, 4);
	if (nops == 0 || nops > FAB_BATCH_MAX || size < 4 + (size_t)flen)
		return 0; /* nic_serve drops or waits for these */
	/* A private copy of exactly the frame, so ASan sees any read past it. */
	char *q = malloc(4 + (size_t)flen);
	if (!q)
		abort();
	memcpy(q, data, 4 + (size_t)flen);

	struct fab_op ops[FAB_BATCH_MAX];
	uint32_t resp = 0;
	if (tcp_request_decode(q, flen, ops, nops, &resp) != 0) {
		free(q);
		return 0;
	}

	struct fab_op *opp[FAB_BATCH_MAX];
	struct fab_rpc_reply reps[FAB_BATCH_MAX];
	uint64_t olds[FAB_BATCH_MAX];
	uint64_t reads = 0;
	for (uint32_t i = 0; i < nops; i++) {
		struct fab_op *op = &ops[i];
		opp[i] = op;
		if (op->kind == FAB_WRITE || op->kind == FAB_RPC) {
			const char *b = op->buf;
			if (b < q + 8 || b + op->len > q + 4 + flen)
				abort(); /* a payload outside the frame */
		}
		if (op->kind == FAB_RPC) {
			reps[i] = (struct fab_rpc_reply){ .cap = (uint32_t)op->cmp };
			op->rep = &reps[i];
		} else if (op->kind == FAB_CAS || op->kind == FAB_FAA) {
			op->old = &olds[i];
			reads += 8;
		} else if (op->kind == FAB_READ) {
			reads += op->len;
		}
	}
	if (reads != resp)
		abort(); /* the response carries every READ's bytes and every old value */

	/* Encode it back: the same bytes (an RPC's capacity travels in cmp). */
	size_t esz = tcp_request_size(opp, (int)nops);
	if (esz != 4 + (size_t)flen)
		abort();
	char *e = malloc(esz);
	if (!e)
		abort();
	tcp_request_encode(e, opp, (int)nops);
	if (memcmp(e, q, esz) != 0)
		abort();
	free(e);

	/* A target refuses a READ past its region before reserving its bytes
	 * (rdma/tcp.c nic_serve), so no response carries more than a region;
	 * above 64 MiB the harness would only measure malloc. */
	if (resp > (64u << 20)) {
		free(q);
		return 0;
	}
	/* The rest of the input answers the request. */
	const uint8_t *r = data + 4 + flen;
	size_t rlen = size - 4 - flen;
	char *payload = malloc(rlen ? rlen : 1);
	if (!payload)
		abort();
	memcpy(payload, r, rlen);
	for (uint32_t i = 0; i < nops; i++) {
		if (ops[i].kind == FAB_READ) {
			ops[i].buf = malloc(ops[i].len);
			if (!ops[i].buf)
				abort();
		} else if (ops[i].kind == FAB_RPC) {
			reps[i].buf = reps[i].cap ? malloc(reps[i].cap) : NULL;
		}
	}
	(void)tcp_response_decode(payload, rlen, opp, (int)nops);
	for (uint32_t i = 0; i < nops; i++) {
		if (ops[i].kind == FAB_READ)
			free(ops[i].buf);
		else if (ops[i].kind == FAB_RPC) {
			if (reps[i].len > reps[i].cap)
				abort();
			free(reps[i].buf);
		}
	}
	free(payload);
	free(q);
	return 0;
}
