/*
 * test_resp: the RESP codec (resp/). Request parsing is checked against the
 * bytes and error texts Redis 7.0 produces for the same input (checked on
 * redis-server 7.0.15), fed whole and one byte at a time; replies are
 * compared byte for byte in RESP2 and RESP3. Ends with a parse benchmark
 * that prints ns/request and asserts nothing about time.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "resp/resp.h"

static int failures;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
				#cond);                                          \
			failures++;                                              \
		}                                                                \
	} while (0)

/* ---- a growable byte string, to encode parse results ---- */

struct str {
	char *p;
	size_t len, cap;
};

static void str_add(struct str *s, const void *p, size_t len)
{
	if (s->cap - s->len < len + 1) {
		size_t ncap = s->cap ? s->cap * 2 : 256;
		while (ncap - s->len < len + 1)
			ncap *= 2;
		s->p = realloc(s->p, ncap);
		if (s->p == NULL)
			abort();
		s->cap = ncap;
	}
	memcpy(s->p + s->len, p, len);
	s->len += len;
	s->p[s->len] = '\0';
}

static void str_addf(struct str *s, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	str_add(s, buf, (size_t)n);
}

/* Requests are encoded as "<argc>[<len>:<bytes>]...;" so that binary
 * arguments compare exactly. */
static void enc_req(struct str *s, int argc, const struct resp_arg *argv)
{
	str_addf(s, "%d", argc);
	for (int i = 0; i < argc; i++) {
		str_addf(s, "[%zu:", argv[i].len);
		str_add(s, argv[i].p, argv[i].len);
		str_add(s, "]", 1);
	}
	str_add(s, ";", 1);
}

/* Expected requests: each argument a C string ("|"-separated request
 * description would not be binary safe, so this takes string lists). */
static void expect_req(struct str *s, int argc, ...)
{
	struct resp_arg a[16];
	va_list ap;
	va_start(ap, argc);
	for (int i = 0; i < argc; i++) {
		a[i].p = va_arg(ap, char *);
		a[i].len = strlen(a[i].p);
	}
	va_end(ap);
	enc_req(s, argc, a);
}

struct outcome {
	struct str reqs;
	enum resp_status last; /* RESP_AGAIN or RESP_ERR */
	char err[160];
	size_t pending;
	size_t err_at; /* bytes fed when the error was returned */
};

static const struct resp_limits redis_limits = {
	.max_query_buf = 1024ul * 1024 * 1024,
	.max_bulk_len = 512ul * 1024 * 1024,
	.max_multibulk = INT_MAX,
	.max_inline = 64 * 1024,
};

/* Feed in chunks of `chunk` bytes (0: all at once), draining requests after
 * each feed, as a server does. */
static void run(struct outcome *o, const struct resp_limits *lim, const char *in, size_t len,
		size_t chunk)
{
	struct resp_parser *p = resp_parser_create(lim);
	size_t off = 0;

	memset(o, 0, sizeof(*o));
	o->last = RESP_AGAIN;
	if (chunk == 0)
		chunk = len ? len : 1;
	while (off < len) {
		size_t n = len - off < chunk ? len - off : chunk;
		CHECK(resp_parser_feed(p, in + off, n) == 0);
		off += n;
		for (;;) {
			int argc = -1;
			struct resp_arg *argv = NULL;
			const char *err = NULL;
			enum resp_status st = resp_parser_next(p, &argc, &argv, &err);
			if (st == RESP_OK) {
				CHECK(argc > 0);
				for (int i = 0; i < argc; i++)
					CHECK(argv[i].p[argv[i].len] == '\0');
				enc_req(&o->reqs, argc, argv);
				continue;
			}
			o->last = st;
			if (st == RESP_ERR) {
				snprintf(o->err, sizeof(o->err), "%s", err);
				o->err_at = off;
				/* the parser stays dead, with the same text */
				const char *err2 = NULL;
				CHECK(resp_parser_next(p, &argc, &argv, &err2) == RESP_ERR);
				CHECK(err2 != NULL && strcmp(err2, err) == 0);
				goto out;
			}
			break;
		}
	}
out:
	o->pending = resp_parser_pending(p);
	resp_parser_free(p);
	if (o->reqs.p == NULL)
		str_add(&o->reqs, "", 0);
}

static const size_t chunks[] = {0, 1, 2, 3, 5, 7, 64};
#define NCHUNKS (sizeof(chunks) / sizeof(chunks[0]))

/* Parse `in` at every chunk size; all must give `want` and end in AGAIN. */
static void check_parse_len(int line, const char *in, size_t len, const struct str *want)
{
	for (size_t c = 0; c < NCHUNKS; c++) {
		struct outcome o;
		run(&o, &redis_limits, in, len, chunks[c]);
		if (o.last != RESP_AGAIN || strcmp(o.reqs.p, want->p) != 0 ||
		    o.reqs.len != want->len) {
			fprintf(stderr, "line %d, chunk %zu: got %s (%s) want %s\n", line, chunks[c],
				o.reqs.p, o.last == RESP_ERR ? o.err : "again", want->p);
			failures++;
		}
		free(o.reqs.p);
	}
}
#define check_parse(in, want) check_parse_len(__LINE__, in, sizeof(in) - 1, want)

/* Parse `in` at every chunk size; all must fail with exactly `err`. When
 * at_end, the error must come as soon as the last byte is fed (limits are
 * checked before the data they announce arrives). */
static void check_error_len(int line, const struct resp_limits *lim, const char *in, size_t len,
			    const char *err, bool at_end)
{
	for (size_t c = 0; c < NCHUNKS; c++) {
		struct outcome o;
		run(&o, lim ? lim : &redis_limits, in, len, chunks[c]);
		if (o.last != RESP_ERR || strcmp(o.err, err) != 0 || (at_end && o.err_at != len)) {
			fprintf(stderr, "line %d, chunk %zu: got '%s' at %zu, want '%s' at %zu\n",
				line, chunks[c], o.last == RESP_ERR ? o.err : "(again)", o.err_at,
				err, len);
			failures++;
		}
		free(o.reqs.p);
	}
}
#define check_error(in, err) check_error_len(__LINE__, NULL, in, sizeof(in) - 1, err, true)
#define check_error_lim(lim, in, err) check_error_len(__LINE__, lim, in, sizeof(in) - 1, err, true)

/* ---- request tests ---- */

static void test_multibulk(void)
{
	struct str w = {0};

	expect_req(&w, 3, "SET", "k", "v");
	check_parse("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", &w);
	free(w.p);

	/* pipelined, with an empty bulk and skipped *0 / *-1 / *-5 */
	memset(&w, 0, sizeof(w));
	expect_req(&w, 1, "PING");
	expect_req(&w, 2, "ECHO", "");
	expect_req(&w, 3, "SET", "key:000123", "xxx");
	expect_req(&w, 1, "PING");
	check_parse("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n*0\r\n*-1\r\n"
		    "*3\r\n$3\r\nSET\r\n$10\r\nkey:000123\r\n$3\r\nxxx\r\n*-5\r\n"
		    "*1\r\n$4\r\nPING\r\n",
		    &w);
	free(w.p);

	/* Redis ends a header line at its first '\r' whatever follows, and
	 * skips the two bytes after a body unchecked. */
	memset(&w, 0, sizeof(w));
	expect_req(&w, 1, "PING");
	expect_req(&w, 1, "PING");
	expect_req(&w, 1, "PING");
	check_parse("*1\rx$4\r\nPING\r\n*1\r\n$4\r?PING\r\n*1\r\n$4\r\nPINGxy", &w);
	free(w.p);

	/* binary-safe arguments: NUL, CR, LF, "$", "*" inside */
	{
		static const char in[] = "*3\r\n$3\r\nSET\r\n$5\r\na\0b\r\n\r\n$6\r\n*1\r\n$\0\r\n";
		struct resp_arg a[3] = {{"SET", 3}, {"a\0b\r\n", 5}, {"*1\r\n$\0", 6}};
		memset(&w, 0, sizeof(w));
		enc_req(&w, 3, a);
		check_parse(in, &w);
		free(w.p);
	}

	/* a lone partial request stays pending, and nothing is returned */
	{
		struct outcome o;
		static const char in[] = "*2\r\n$3\r\nGET\r\n$3\r\nke";
		run(&o, &redis_limits, in, sizeof(in) - 1, 1);
		CHECK(o.last == RESP_AGAIN && o.reqs.len == 0);
		/* like Redis's qbuf, what is parsed is not counted: "*2", "GET",
		 * and the '$' type byte hiredis has consumed */
		CHECK(o.pending == sizeof(in) - 1 - strlen("*2\r\n$3\r\nGET\r\n$"));
		free(o.reqs.p);
	}
}

static void test_inline(void)
{
	struct str w = {0};

	expect_req(&w, 1, "PING");
	expect_req(&w, 3, "SET", "a b", "c'd");
	expect_req(&w, 2, "ECHO", "Ax4g\n\"\\q\r\t\b\a");
	expect_req(&w, 2, "ECHO", "ab c");
	expect_req(&w, 2, "ECHO", "");
	expect_req(&w, 3, "ECHO", "a\vb", "c\fd");
	expect_req(&w, 2, "ECHO", "\\x41\\n");
	expect_req(&w, 2, "x", "y");
	expect_req(&w, 2, "ECHO", "\x7f\xff");
	check_parse("PING\r\n"
		    "\r\n\n   \r\n\t\n" /* empty lines are skipped */
		    "SET   \"a b\"\t'c\\'d'\r\n"
		    "ECHO \"\\x41\\x4g\\n\\\"\\\\\\q\\r\\t\\b\\a\"\n"
		    "ECHO a\"b c\"\n"
		    "ECHO \"\"\n"
		    "ECHO a\vb c\fd\r\n"
		    "ECHO '\\x41\\n'\n"
		    "x\ry\r\r\n" /* '\r' separates; only one is stripped */
		    "ECHO \"\\x7f\\xFF\"\n",
		    &w);
	free(w.p);

	/* inline and multibulk mixed in one pipeline */
	memset(&w, 0, sizeof(w));
	expect_req(&w, 2, "GET", "a");
	expect_req(&w, 2, "GET", "b");
	expect_req(&w, 2, "GET", "c");
	check_parse("GET a\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\nGET c\n", &w);
	free(w.p);

	check_error("ECHO \"a\r\n", "Protocol error: unbalanced quotes in request");
	check_error("ECHO \"a\"b\r\n", "Protocol error: unbalanced quotes in request");
	check_error("ECHO 'a'b\r\n", "Protocol error: unbalanced quotes in request");
	check_error("ECHO 'a\n", "Protocol error: unbalanced quotes in request");
	check_error("ECHO \"a\\\"\n", "Protocol error: unbalanced quotes in request");
}

static void test_errors(void)
{
	check_error("*1\r\n:1\r\n", "Protocol error: expected '$', got ':'");
	check_error("*1\r\n+a\r\n", "Protocol error: expected '$', got '+'");
	check_error("*1\r\n-a\r\n", "Protocol error: expected '$', got '-'");
	check_error("*1\r\n*1\r\n", "Protocol error: expected '$', got '*'"); /* nested */
	check_error("*2\r\n$4\r\nECHO\r\n*1\r\n", "Protocol error: expected '$', got '*'");
	check_error("*1\r\n\n\r\n", "Protocol error: expected '$', got ' '");
	/* the line is "\r" plus any byte: complete after 6 bytes, as in Redis */
	check_error_len(__LINE__, NULL, "*1\r\n\r\r", 6, "Protocol error: expected '$', got ' '", true);
	check_error("*1\r\n$-1\r\n", "Protocol error: invalid bulk length");
	check_error("*1\r\n$03\r\n", "Protocol error: invalid bulk length");
	check_error("*1\r\n$+3\r\n", "Protocol error: invalid bulk length");
	check_error("*1\r\n$\r\n", "Protocol error: invalid bulk length");
	check_error("*1\r\n$3 \r\n", "Protocol error: invalid bulk length");
	check_error("*1\r\n$abc\r\n", "Protocol error: invalid bulk length");
	check_error("*1\r\n$99999999999999999999\r\n", "Protocol error: invalid bulk length");
	check_error("*abc\r\n", "Protocol error: invalid multibulk length");
	check_error("*\r\n", "Protocol error: invalid multibulk length");
	check_error("*+1\r\n", "Protocol error: invalid multibulk length");
	check_error("*01\r\n", "Protocol error: invalid multibulk length");
	check_error("*-0\r\n", "Protocol error: invalid multibulk length");
	check_error("*2147483648\r\n", "Protocol error: invalid multibulk length");
	/* the error comes after the good requests before it */
	{
		struct outcome o;
		static const char in[] = "PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n:1\r\n";
		run(&o, &redis_limits, in, sizeof(in) - 1, 1);
		CHECK(o.last == RESP_ERR && strcmp(o.reqs.p, "1[4:PING];1[4:PING];") == 0);
		free(o.reqs.p);
	}
}

static void test_limits(void)
{
	struct resp_limits lim = redis_limits;

	/* a huge declared bulk is refused as soon as its header is complete */
	check_error("*2\r\n$3\r\nSET\r\n$536870913\r\n", "Protocol error: invalid bulk length");
	{
		struct outcome o;
		static const char in[] = "*2\r\n$3\r\nSET\r\n$536870912\r\n";
		run(&o, &redis_limits, in, sizeof(in) - 1, 0);
		CHECK(o.last == RESP_AGAIN);
		free(o.reqs.p);
	}
	lim.max_bulk_len = 10;
	check_error_lim(&lim, "*1\r\n$11\r\n", "Protocol error: invalid bulk length");
	{
		struct outcome o;
		static const char in[] = "*1\r\n$10\r\n0123456789\r\n";
		run(&o, &lim, in, sizeof(in) - 1, 1);
		CHECK(o.last == RESP_AGAIN && strcmp(o.reqs.p, "1[10:0123456789];") == 0);
		free(o.reqs.p);
	}

	lim = redis_limits;
	lim.max_multibulk = 4;
	check_error_lim(&lim, "*5\r\n", "Protocol error: invalid multibulk length");
	{
		struct outcome o;
		static const char in[] = "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n";
		run(&o, &lim, in, sizeof(in) - 1, 1);
		CHECK(o.last == RESP_AGAIN &&
		      strcmp(o.reqs.p, "4[1:a][1:b][1:c][1:d];") == 0);
		free(o.reqs.p);
	}

	/* lines without their end: Redis allows 64 KiB, we use max_inline */
	lim = redis_limits;
	lim.max_inline = 16;
	check_error_lim(&lim, "AAAAAAAAAAAAAAAAA" /* 17 */, "Protocol error: too big inline request");
	check_error_lim(&lim, "*1111111111111111" /* 17 */, "Protocol error: too big mbulk count string");
	check_error_lim(&lim, "*1\r\n$1111111111111111" /* 4 + 17 */,
			"Protocol error: too big bulk count string");
	{
		struct outcome o;
		run(&o, &lim, "AAAAAAAAAAAAAAAA", 16, 1); /* exactly 16: still waiting */
		CHECK(o.last == RESP_AGAIN && o.pending == 16);
		free(o.reqs.p);
		/* a complete line may be longer than the limit, as in Redis */
		static const char line[] = "ECHO aaaaaaaaaaaaaaaaaaaaaa\r\n";
		run(&o, &lim, line, sizeof(line) - 1, 0);
		CHECK(o.last == RESP_AGAIN &&
		      strcmp(o.reqs.p, "2[4:ECHO][22:aaaaaaaaaaaaaaaaaaaaaa];") == 0);
		free(o.reqs.p);
	}
	/* Redis finds line ends with strchr: a NUL hides them, and the request
	 * only ends with the "too big" error */
	check_error_lim(&lim, "*1\r\n$1\0\r\nabcdefghijkl" /* 4 + 17 */, "Protocol error: too big bulk count string");
	check_error_lim(&lim, "*1\0\r\n123456789012" /* 17 */, "Protocol error: too big mbulk count string");
	check_error_lim(&lim, "PING\0\r\n1234567890" /* 17 */, "Protocol error: too big inline request");
	{
		struct outcome o;
		run(&o, &lim, "PING\0\r\nPING\r\n", 13, 1);
		CHECK(o.last == RESP_AGAIN && o.reqs.len == 0);
		free(o.reqs.p);
	}
	/* the Redis default, 64 KiB */
	{
		size_t n = 64 * 1024 + 1;
		char *big = malloc(n);
		memset(big, 'A', n);
		check_error_len(__LINE__, NULL, big, n, "Protocol error: too big inline request",
				true);
		struct outcome o;
		run(&o, &redis_limits, big, n - 1, 0);
		CHECK(o.last == RESP_AGAIN);
		free(o.reqs.p);
		free(big);
	}

	/* query buffer: unparsed bytes of an incomplete request ("*1\r\n" and
	 * the '$' are parsed, the bulk is not until it is complete) */
	lim = redis_limits;
	lim.max_query_buf = 100;
	{
		char in[256];
		int n = snprintf(in, sizeof(in), "*1\r\n$500\r\n");
		memset(in + n, 'x', 200);
		check_error_len(__LINE__, &lim, in, 106, "Protocol error: query buffer limit exceeded",
				true);
		struct outcome o;
		run(&o, &lim, in, 105, 7);
		CHECK(o.last == RESP_AGAIN && o.pending == 100);
		free(o.reqs.p);
	}
	/* complete requests are not held against the limit */
	{
		struct outcome o;
		struct str in = {0};
		for (int i = 0; i < 100; i++)
			str_add(&in, "*1\r\n$4\r\nPING\r\n", 14);
		run(&o, &lim, in.p, in.len, 0);
		CHECK(o.last == RESP_AGAIN && o.pending == 0);
		free(o.reqs.p);
		free(in.p);
	}
}

/* A large value trickling in, and argv surviving later feeds. */
static void test_large_and_lifetime(void)
{
	struct resp_parser *p = resp_parser_create(&redis_limits);
	size_t vlen = 3 * 1024 * 1024 + 17;
	char *val = malloc(vlen);
	char hdr[64];
	int argc;
	struct resp_arg *argv;
	const char *err;
	size_t off;

	for (size_t i = 0; i < vlen; i++)
		val[i] = (char)(i * 131 + 7);
	int hn = snprintf(hdr, sizeof(hdr), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%zu\r\n", vlen);
	CHECK(resp_parser_feed(p, hdr, (size_t)hn) == 0);
	CHECK(resp_parser_next(p, &argc, &argv, &err) == RESP_AGAIN);
	/* 997-byte pieces: each call costs the new bytes only */
	for (off = 0; off < vlen; off += 997) {
		size_t n = vlen - off < 997 ? vlen - off : 997;
		CHECK(resp_parser_feed(p, val + off, n) == 0);
		CHECK(resp_parser_next(p, &argc, &argv, &err) == RESP_AGAIN);
	}
	/* everything but the parsed "*3", "SET", "k" and '$' is pending */
	CHECK(resp_parser_pending(p) == (size_t)hn - 21 + vlen);
	CHECK(resp_parser_feed(p, "\r\n*1\r\n$4\r\nPING\r\n", 16) == 0);
	CHECK(resp_parser_next(p, &argc, &argv, &err) == RESP_OK);
	CHECK(argc == 3 && argv[2].len == vlen && memcmp(argv[2].p, val, vlen) == 0);
	CHECK(argv[1].len == 1 && argv[1].p[0] == 'k');

	/* The request stays valid while more bytes arrive (invariant (3) of
	 * request.c): feed enough to move and regrow the input buffer. */
	struct str more = {0};
	for (int i = 0; i < 20000; i++)
		str_add(&more, "*2\r\n$3\r\nGET\r\n$4\r\nabcd\r\n", 23);
	CHECK(resp_parser_feed(p, more.p, more.len) == 0);
	CHECK(argc == 3 && argv[2].len == vlen && memcmp(argv[2].p, val, vlen) == 0);
	CHECK(memcmp(argv[0].p, "SET", 4) == 0);

	CHECK(resp_parser_next(p, &argc, &argv, &err) == RESP_OK);
	CHECK(argc == 1 && strcmp(argv[0].p, "PING") == 0);
	int got = 0;
	while (resp_parser_next(p, &argc, &argv, &err) == RESP_OK)
		got += argc == 2 && strcmp(argv[1].p, "abcd") == 0;
	CHECK(got == 20000);
	CHECK(resp_parser_pending(p) == 0);
	free(more.p);
	free(val);
	resp_parser_free(p);
}

/* ---- writer tests ---- */

static void expect_w(int line, struct resp_w *w, const char *want, size_t wlen)
{
	if (w->len != wlen || memcmp(w->p, want, wlen) != 0) {
		fprintf(stderr, "line %d (RESP%d): got \"", line, w->proto);
		for (size_t i = 0; i < w->len; i++)
			fprintf(stderr, (w->p[i] >= 32 && w->p[i] < 127) ? "%c" : "\\x%02x",
				(unsigned char)w->p[i]);
		fprintf(stderr, "\", want \"%s\"\n", want);
		failures++;
	}
	resp_w_reset(w);
}
#define EXPECT(w, s) expect_w(__LINE__, w, s, sizeof(s) - 1)

static void test_writer(void)
{
	struct resp_w w2, w3;

	resp_w_init(&w2, 2);
	resp_w_init(&w3, 3);
	for (int proto = 2; proto <= 3; proto++) {
		struct resp_w *w = proto == 2 ? &w2 : &w3;
		resp_status(w, "OK");
		EXPECT(w, "+OK\r\n");
		resp_error(w, "ERR bad\r\nthing");
		EXPECT(w, "-ERR bad  thing\r\n");
		resp_error(w, "-WRONGTYPE x");
		EXPECT(w, "-WRONGTYPE x\r\n");
		resp_errorf(w, "ERR unknown command '%s', with args beginning with: %s", "FOO",
			    "'a\r\nb' ");
		EXPECT(w, "-ERR unknown command 'FOO', with args beginning with: 'a  b' \r\n");
		resp_errorf(w, "\r\nERR trimmed %d\r\n", 5);
		EXPECT(w, "-ERR trimmed 5\r\n");
		{
			char longmsg[1000];
			memset(longmsg, 'z', sizeof(longmsg) - 1);
			longmsg[sizeof(longmsg) - 1] = '\0';
			resp_errorf(w, "ERR %s!", longmsg);
			CHECK(w->len == 1 + 4 + 999 + 1 + 2 && memcmp(w->p, "-ERR zzz", 8) == 0 &&
			      memcmp(w->p + w->len - 4, "z!\r\n", 4) == 0);
			resp_w_reset(w);
		}
		resp_int(w, 0);
		resp_int(w, -1);
		resp_int(w, 1234567890123LL);
		resp_int(w, LLONG_MAX);
		resp_int(w, LLONG_MIN);
		EXPECT(w, ":0\r\n:-1\r\n:1234567890123\r\n:9223372036854775807\r\n"
			  ":-9223372036854775808\r\n");
		for (long long v = 1; v < LLONG_MAX / 10; v *= 10) {
			char want[64];
			resp_int(w, v - 1);
			resp_int(w, v);
			int n = snprintf(want, sizeof(want), ":%lld\r\n:%lld\r\n", v - 1, v);
			expect_w(__LINE__, w, want, (size_t)n);
		}
		resp_bulk(w, "a\0b", 3);
		resp_bulk(w, "", 0);
		EXPECT(w, "$3\r\na\0b\r\n$0\r\n\r\n");
		resp_bulk_cstr(w, "hello");
		EXPECT(w, "$5\r\nhello\r\n");
		resp_bulk_ll(w, -42);
		resp_bulk_ll(w, 1234567890);
		resp_bulk_ll(w, LLONG_MIN);
		EXPECT(w, "$3\r\n-42\r\n$10\r\n1234567890\r\n$20\r\n-9223372036854775808\r\n");
		resp_array(w, 3);
		resp_array(w, 0);
		EXPECT(w, "*3\r\n*0\r\n");
		resp_w_raw(w, "+RAW\r\n", 6);
		EXPECT(w, "+RAW\r\n");
	}

	resp_null(&w2);
	resp_null_array(&w2);
	EXPECT(&w2, "$-1\r\n*-1\r\n");
	resp_null(&w3);
	resp_null_array(&w3);
	EXPECT(&w3, "_\r\n_\r\n");
	resp_bulk_cstr(&w2, NULL);
	EXPECT(&w2, "$-1\r\n");

	resp_map(&w2, 3);
	EXPECT(&w2, "*6\r\n");
	resp_map(&w3, 3);
	EXPECT(&w3, "%3\r\n");
	resp_set(&w2, 4);
	EXPECT(&w2, "*4\r\n");
	resp_set(&w3, 4);
	EXPECT(&w3, "~4\r\n");

	/* Redis 7.0 ZSCORE of 3.14 / 0.1 / 1e300 / inf, checked on 7.0.15 */
	resp_double(&w2, 3.14);
	resp_double(&w2, 0.1);
	resp_double(&w2, 10.5);
	resp_double(&w2, 1e300);
	resp_double(&w2, 1e17);
	resp_double(&w2, 1.0 / 0.0);
	resp_double(&w2, -1.0 / 0.0);
	EXPECT(&w2, "$18\r\n3.1400000000000001\r\n$19\r\n0.10000000000000001\r\n$4\r\n10.5\r\n"
		    "$23\r\n1.0000000000000001e+300\r\n$5\r\n1e+17\r\n$3\r\ninf\r\n$4\r\n-inf\r\n");
	resp_double(&w3, 3.14);
	resp_double(&w3, 5000);
	resp_double(&w3, 1.5e-20);
	resp_double(&w3, 1.0 / 0.0);
	resp_double(&w3, -1.0 / 0.0);
	EXPECT(&w3, ",3.1400000000000001\r\n,5000\r\n,1.5000000000000001e-20\r\n,inf\r\n,-inf\r\n");

	resp_bool(&w2, true);
	resp_bool(&w2, false);
	EXPECT(&w2, ":1\r\n:0\r\n");
	resp_bool(&w3, true);
	resp_bool(&w3, false);
	EXPECT(&w3, "#t\r\n#f\r\n");

	resp_verbatim(&w2, "a\r\nb", 4);
	EXPECT(&w2, "$4\r\na\r\nb\r\n");
	resp_verbatim(&w3, "a\r\nb", 4);
	EXPECT(&w3, "=8\r\ntxt:a\r\nb\r\n");

	/* INCRBYFLOAT's human form, as Redis 7.0.15 replied for 0 + x */
	{
		static const struct {
			const char *in, *out;
		} h[] = {
			{"3.14", "3.14"}, {"0.1", "0.1"}, {"10.5", "10.5"}, {"5.0e3", "5000"},
			{"1.5e-20", "0"}, {"-0.0", "0"}, {"-2.5", "-2.5"}, {"100", "100"},
			{"1e300", "1000000000000000000008997324079559193870523944273290747938260082321"
				  "265646596180935755849152083750497190350372508614274835903592556184"
				  "672983913096260520748646287327135641843653294084255107606016789726"
				  "652932370030551382947620994540294772781889620606179267611627097410"
				  "650567187386105690089424915104006144"},
		};
		for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
			char buf[RESP_LD_HUMAN_MAX];
			long double v = strtold(h[i].in, NULL) + 0.0L;
			size_t n = resp_ld_human(buf, sizeof(buf), v);
			if (n != strlen(h[i].out) || strcmp(buf, h[i].out) != 0) {
				fprintf(stderr, "ld_human(%s) = %s, want %s\n", h[i].in, buf, h[i].out);
				failures++;
			}
		}
		char small[4];
		CHECK(resp_ld_human(small, sizeof(small), 12345.0L) == 0);
		char buf[RESP_LD_HUMAN_MAX];
		CHECK(resp_ld_human(buf, sizeof(buf), -1.0L / 0.0L) == 4 && strcmp(buf, "-inf") == 0);
		/* the largest long double fits RESP_LD_HUMAN_MAX */
		CHECK(resp_ld_human(buf, sizeof(buf), -__LDBL_MAX__) > 4900);
		resp_bulk_ld_human(&w2, 3.5L);
		EXPECT(&w2, "$3\r\n3.5\r\n");
		resp_bulk_ld_human(&w3, 3.5L);
		EXPECT(&w3, "$3\r\n3.5\r\n");
	}

	/* append, and growth across many replies */
	{
		struct resp_w a;
		resp_w_init(&a, 2);
		for (int i = 0; i < 10000; i++)
			resp_int(&a, i);
		resp_status(&w2, "X");
		resp_w_append(&w2, &a);
		CHECK(w2.len == 4 + a.len && memcmp(w2.p + 4, a.p, a.len) == 0);
		CHECK(memcmp(a.p + a.len - 7, ":9999\r\n", 7) == 0);
		resp_w_free(&a);
		resp_w_reset(&w2);
	}
	resp_w_free(&w2);
	resp_w_free(&w3);
}

/* ---- benchmark (prints, never asserts on time) ---- */

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void bench_one(const char *name, const struct str *in, int nreq, size_t chunk)
{
	struct resp_parser *p = resp_parser_create(&redis_limits);
	int argc, got = 0;
	struct resp_arg *argv;
	const char *err;
	size_t off = 0, sum = 0;
	double t0 = now_ns();

	if (chunk == 0)
		chunk = in->len;
	while (off < in->len) {
		size_t n = in->len - off < chunk ? in->len - off : chunk;
		resp_parser_feed(p, in->p + off, n);
		off += n;
		while (resp_parser_next(p, &argc, &argv, &err) == RESP_OK) {
			got++;
			sum += argv[argc - 1].len;
		}
	}
	double t1 = now_ns();
	CHECK(got == nreq && sum == (size_t)nreq * 3);
	printf("bench %-34s %d requests, %.1f ns/request\n", name, nreq, (t1 - t0) / nreq);
	resp_parser_free(p);
}

static void bench(void)
{
	const int nreq = 1000000;
	struct str mb = {0}, il = {0};
	char buf[128];

	for (int i = 0; i < nreq; i++) {
		int n = snprintf(buf, sizeof(buf), "*3\r\n$3\r\nSET\r\n$10\r\nkey:%06d\r\n$3\r\nxxx\r\n",
				 i);
		str_add(&mb, buf, (size_t)n);
		n = snprintf(buf, sizeof(buf), "SET key:%06d xxx\r\n", i);
		str_add(&il, buf, (size_t)n);
	}
	bench_one("multibulk, 16 KiB reads", &mb, nreq, 16 * 1024);
	bench_one("multibulk, one 37 MB feed", &mb, nreq, 0);
	bench_one("inline, 16 KiB reads", &il, nreq, 16 * 1024);

	struct resp_w w;
	resp_w_init(&w, 2);
	double t0 = now_ns();
	for (int i = 0; i < nreq; i++) {
		if ((i & 1023) == 0)
			resp_w_reset(&w);
		resp_bulk(&w, "xxx", 3);
		resp_int(&w, i);
	}
	double t1 = now_ns();
	printf("bench %-34s %d replies, %.1f ns/reply\n", "writer bulk+int", 2 * nreq,
	       (t1 - t0) / (2.0 * nreq));
	resp_w_free(&w);
	free(mb.p);
	free(il.p);
}

int main(void)
{
	test_multibulk();
	test_inline();
	test_errors();
	test_limits();
	test_large_and_lifetime();
	test_writer();
	bench();
	if (failures) {
		fprintf(stderr, "test_resp: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_resp: all passed\n");
	return 0;
}
