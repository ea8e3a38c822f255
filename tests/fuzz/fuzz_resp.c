/*
 * fuzz_resp: the RESP request parser (resp/request.c), multibulk and inline.
 *
 * The input is the byte stream a client sends. It is parsed twice: fed in
 * one piece, and fed in pieces whose sizes a small generator seeded by the
 * input's first byte chooses (1 byte, a few bytes, a few KiB). Both must
 * return the same requests, byte for byte, and end the same way (the same
 * error text, or "need more"): a parser whose result depends on how TCP
 * cut the stream is a bug. The limits are the defaults for that
 * comparison, because Redis's own limits legitimately depend on the cut
 * (a line over max_inline is refused before its end arrives); a third pass
 * with small limits checks only that nothing breaks and that the requests
 * it returned before failing are a prefix of the first pass's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp/resp.h"

struct log {
	char *p;
	size_t len, cap;
	int nreq;
	const char *err; /* NULL: ended wanting more bytes */
	char errbuf[200];
};

static void log_put(struct log *l, const void *p, size_t n)
{
	if (l->cap - l->len < n) {
		size_t c = l->cap ? l->cap * 2 : 4096;
		while (c - l->len < n)
			c *= 2;
		l->p = realloc(l->p, c);
		if (!l->p)
			abort();
		l->cap = c;
	}
	memcpy(l->p + l->len, p, n);
	l->len += n;
}

/* Take every complete request; 0 to go on, 1 once the parser failed. */
static int drain(struct resp_parser *rp, struct log *l)
{
	for (;;) {
		int argc;
		struct resp_arg *argv;
		const char *err;
		enum resp_status st = resp_parser_next(rp, &argc, &argv, &err);
		if (st == RESP_AGAIN)
			return 0;
		if (st == RESP_ERR) {
			snprintf(l->errbuf, sizeof(l->errbuf), "%s", err);
			l->err = l->errbuf;
			return 1;
		}
		if (argc <= 0)
			abort(); /* the contract: never an empty request */
		uint32_t n = (uint32_t)argc;
		log_put(l, &n, 4);
		for (int i = 0; i < argc; i++) {
			uint64_t len = argv[i].len;
			if (argv[i].p[len] != '\0')
				abort(); /* each argument is NUL-terminated */
			log_put(l, &len, 8);
			log_put(l, argv[i].p, len);
		}
		l->nreq++;
	}
}

static void run(const uint8_t *d, size_t n, unsigned seed, const struct resp_limits *lim,
		struct log *l)
{
	struct resp_parser *rp = resp_parser_create(lim);
	size_t off = 0;
	if (!rp)
		abort();
	while (off < n) {
		size_t k = n - off;
		if (seed) {
			seed = seed * 1103515245u + 12345u;
			unsigned r = (seed >> 16) & 0xff;
			k = r < 128 ? 1 : r < 224 ? 1 + r % 16 : 1 + (r % 8) * 997;
			if (k > n - off)
				k = n - off;
		}
		if (resp_parser_feed(rp, (const char *)d + off, k) != 0)
			abort();
		off += k;
		if (drain(rp, l))
			break;
	}
	resp_parser_free(rp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct log whole = { 0 }, cut = { 0 }, small = { 0 };
	unsigned seed = size ? data[0] | 1u : 1u;

	run(data, size, 0, NULL, &whole);
	run(data, size, seed, NULL, &cut);
	if (whole.nreq != cut.nreq || whole.len != cut.len ||
	    (whole.len && memcmp(whole.p, cut.p, whole.len) != 0) || (whole.err == NULL) != (cut.err == NULL) ||
	    (whole.err && strcmp(whole.err, cut.err) != 0)) {
		fprintf(stderr, "one piece: %d requests, %s; in pieces: %d requests, %s\n",
			whole.nreq, whole.err ? whole.err : "more", cut.nreq,
			cut.err ? cut.err : "more");
		abort();
	}

	struct resp_limits lim = { .max_query_buf = 1024, .max_bulk_len = 64, .max_multibulk = 8,
				   .max_inline = 32 };
	run(data, size, seed, &lim, &small);
	if (small.len > whole.len || (small.len && memcmp(small.p, whole.p, small.len) != 0))
		abort(); /* small limits may stop early, never parse differently */
	free(whole.p);
	free(cut.p);
	free(small.p);
	return 0;
}
