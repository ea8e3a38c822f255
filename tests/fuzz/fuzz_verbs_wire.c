/*
 * fuzz_verbs_wire: the verbs fabric's messages (rdma/verbs_wire.c): the
 * queue-pair bootstrap request and reply that arrive over the control
 * plane (CTL_FAB), and the RPC call and answer headers that arrive as
 * SENDs. The first input byte picks the decoder, the rest is the message.
 * A message that decodes must encode back to the same bytes, but for the
 * reserved fields (which the decoders do not read) and a reply's fields
 * past a non-OK status. verbs_parse_index gets the bytes as a string.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/verbs_wire.h"

/* Equal but for the byte ranges [skip[2i], skip[2i+1]). */
static void same(const uint8_t *a, const uint8_t *b, size_t n, const size_t *skip, int nskip)
{
	for (size_t i = 0; i < n; i++) {
		int skipped = 0;
		for (int k = 0; k < nskip; k++)
			skipped |= i >= skip[2 * k] && i < skip[2 * k + 1];
		if (!skipped && a[i] != b[i])
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned which = data[0] % 5;
	size_t len = size - 1;
	uint8_t *m = malloc(len ? len : 1); /* exactly the message: reads past it are reports */
	uint8_t out[VERBS_REP_BYTES > VERBS_RPC_HDR ? VERBS_REP_BYTES : VERBS_RPC_HDR];
	if (!m)
		abort();
	memcpy(m, data + 1, len);
	uint16_t version = 0;

	switch (which) {
	case 0: {
		struct verbs_qp_req r;
		if (verbs_req_decode(m, len, &r, &version) == 0) {
			static const size_t skip[] = { 38, 40 };
			verbs_req_encode(&r, out);
			same(out, m, VERBS_REQ_BYTES, skip, 1);
		}
		break;
	}
	case 1: {
		struct verbs_qp_rep r;
		if (verbs_rep_decode(m, len, &r, &version) == 0) {
			static const size_t skip[] = { 10, 12, 38, 40 };
			verbs_rep_encode(&r, out);
			same(out, m, r.status == VERBS_ST_OK ? VERBS_REP_BYTES : 8, skip, 2);
			(void)verbs_status_str(r.status);
		}
		break;
	}
	case 2: {
		struct verbs_call_hdr h;
		if (verbs_call_decode(m, len, &h) == 0) {
			static const size_t skip[] = { 10, 12 };
			if (h.len != len - VERBS_RPC_HDR)
				abort();
			verbs_call_encode(&h, out);
			same(out, m, VERBS_RPC_HDR, skip, 1);
		}
		break;
	}
	case 3: {
		struct verbs_answer_hdr h;
		if (verbs_answer_decode(m, len, &h) == 0) {
			verbs_answer_encode(&h, out);
			same(out, m, VERBS_RPC_HDR, NULL, 0);
		}
		break;
	}
	default: {
		char *s = malloc(len + 1);
		unsigned v;
		if (!s)
			abort();
		memcpy(s, m, len);
		s[len] = '\0';
		if (verbs_parse_index(s, 1000, &v) == 0 && v > 1000)
			abort();
		free(s);
	}
	}
	free(m);
	return 0;
}
