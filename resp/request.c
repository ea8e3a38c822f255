/*
 * request.c: the RESP request parser (resp_parser_*).
 *
 * A request is either a multibulk ("*N\r\n" then N "$len\r\n<bytes>\r\n")
 * or an inline line; the first byte decides, as in Redis. Multibulks are
 * parsed by hiredis's redisReader with our own object functions, which
 * copy each bulk straight into the parser's arena and never build a
 * redisReply. Inline lines are split by inline.c.
 *
 * A framer runs in front of hiredis. It walks the header lines ("*N",
 * "$len") of the bytes that arrived, skips bulk bodies by their length and
 * checks every header the way Redis 7.0's processMultibulkBuffer does, so
 * that:
 *   - every error carries Redis's exact text (hiredis 0.14.1 has texts of
 *     its own, takes "$-1" for a nil, "*-5" for an error where Redis skips
 *     the request, and has no limits);
 *   - limits are enforced as soon as a header line is complete, before any
 *     of the data it announces arrives;
 *   - "*0" and "*-N" requests are skipped without ever reaching hiredis.
 * The framer remembers where it stopped (state, scan, searched), so a value
 * that trickles in costs O(new bytes) per call, never O(buffered bytes).
 *
 * Line ends. Redis ends a header line at its first '\r' and skips the byte
 * after it whatever it is ("*1\rx$4\r\nPING\r\n" is a PING); hiredis wants
 * "\r\n". The framer overwrites the byte after that first '\r' with '\n'
 * before hiredis sees the line, which makes both read the same line. Redis
 * also finds that '\r' with strchr(), which stops at a NUL: a NUL before the
 * line end hides it forever, and the request then only ends with the "too
 * big ... count string" error once more than 64 KiB are buffered. The framer
 * does the same ("blocked"), and likewise for inline lines.
 *
 * Invariants:
 * (1) hiredis is fed only bytes the framer has validated: in[head, scan) of
 *     a multibulk. Hence hiredis never fails on its own, and its errors
 *     (only possible if this file has a bug) are still mapped to Redis texts.
 * (2) hiredis never holds bytes of more than one request. Its reader
 *     memmoves its unread tail each time it has consumed 1 KiB, so feeding
 *     it a large pipeline would be quadratic; fed one request at a time,
 *     that tail is empty or a part of the current request.
 * (3) A returned argv and its bytes live in p->argv and p->arena, which only
 *     resp_parser_next resets. resp_parser_feed may move p->in but never
 *     the arena, so a request stays valid while the server runs it and more
 *     bytes arrive.
 * (4) head <= scan <= tail. In FR_IDLE, FR_COUNT and FR_INLINE, scan ==
 *     head: nothing of the request has been validated yet.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/read.h>

#include "resp/resp.h"
#include "resp/resp_internal.h"

/* Redis 7.0 defaults, used for the limits a caller leaves at 0. */
#define DEF_MAX_QUERY_BUF (1024ull * 1024 * 1024)
#define DEF_MAX_BULK_LEN (512ull * 1024 * 1024)
#define DEF_MAX_MULTIBULK ((size_t)INT_MAX)
#define DEF_MAX_INLINE (64 * 1024)

/* Buffers above this many bytes are released once idle, so a connection
 * that sent one large value does not keep its memory forever. */
#define KEEP_BYTES (256 * 1024)
#define KEEP_ARGS 4096
#define MIN_IN_BUF (16 * 1024)

/* hiredis frees its buffer once it is empty and has more than this many
 * spare bytes: enough for common requests, so it is reused, while the
 * buffer of a large value is returned at the next feed. */
#define HIREDIS_MAXBUF (64 * 1024)

static const char E_BULK_LEN[] = "Protocol error: invalid bulk length";
static const char E_MBULK_LEN[] = "Protocol error: invalid multibulk length";
static const char E_BIG_MBULK[] = "Protocol error: too big mbulk count string";
static const char E_BIG_BULK[] = "Protocol error: too big bulk count string";
static const char E_BIG_INLINE[] = "Protocol error: too big inline request";
static const char E_QUOTES[] = "Protocol error: unbalanced quotes in request";
static const char E_QBUF[] = "Protocol error: query buffer limit exceeded";
static const char E_NOMEM[] = "Protocol error: out of memory";
static const char E_MISMATCH[] = "Protocol error: internal parser mismatch";

enum frame_state {
	FR_IDLE,      /* between requests */
	FR_INLINE,    /* looking for the '\n' of an inline line */
	FR_COUNT,     /* reading the "*N" line */
	FR_BULK_HDR,  /* reading a "$len" line */
	FR_BULK_BODY, /* skipping body_left bytes of a bulk and its CRLF */
};

enum line_result {
	LINE_OK,   /* a complete line: its '\r' and the byte after it arrived */
	LINE_NOCR, /* no usable '\r' yet: the "too big" limit applies */
	LINE_WAIT, /* the '\r' arrived, the byte after it did not */
};

struct resp_parser {
	struct resp_limits lim;
	redisReader *rd;

	/* Bytes fed and not yet handed to hiredis or split: in[head, tail). */
	char *in;
	size_t head, tail, cap;

	/* Framer state for the request that starts at in[head]. */
	enum frame_state st;
	size_t scan;                  /* see invariant (4) */
	size_t searched;              /* a line search resumes here */
	bool blocked;                 /* a NUL hides the current line's end */
	long long args_left;          /* bulks not yet framed */
	unsigned long long body_left; /* body bytes + CRLF not yet seen */

	/* The request being built, then returned (invariant (3)). */
	struct resp_arg *argv;
	size_t argc, argv_cap;
	char *arena;
	size_t arena_len, arena_cap;
	bool returned; /* argv was handed out: reset at the next call */

	const char *cb_err; /* set by a hiredis callback that refused */
	const char *err;    /* set once: the parser is dead */
	char errbuf[160];
};

/* ---- small helpers ---- */

/*
 * Redis's string2ll rules: optional '-', no '+', no leading zeros, no
 * blanks, "-0" refused, at most 20 characters, no overflow.
 */
static bool parse_ll(const char *s, size_t n, long long *out)
{
	size_t i = 0;
	bool neg = false;
	unsigned long long v = 0;

	if (n == 0 || n > 20)
		return false;
	if (n == 1 && s[0] == '0') {
		*out = 0;
		return true;
	}
	if (s[0] == '-') {
		neg = true;
		i = 1;
		if (n == 1)
			return false;
	}
	if (s[i] < '1' || s[i] > '9')
		return false;
	for (; i < n; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';
		if (d > 9 || v > (ULLONG_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (neg) {
		if (v > (unsigned long long)LLONG_MAX + 1)
			return false;
		*out = (long long)(0 - v);
	} else {
		if (v > (unsigned long long)LLONG_MAX)
			return false;
		*out = (long long)v;
	}
	return true;
}

static enum resp_status fail(struct resp_parser *p, const char *msg, const char **errmsg)
{
	p->err = msg;
	*errmsg = msg;
	return RESP_ERR;
}

/* Redis formats the offending byte with %c, and the reply writer then turns
 * '\r' and '\n' into spaces. A NUL can never get here (see "Line ends"). */
static enum resp_status fail_expected(struct resp_parser *p, char c, const char **errmsg)
{
	if (c == '\r' || c == '\n')
		c = ' ';
	snprintf(p->errbuf, sizeof(p->errbuf), "Protocol error: expected '$', got '%c'", c);
	return fail(p, p->errbuf, errmsg);
}

static bool arena_grow(struct resp_parser *p, size_t need)
{
	size_t want = p->arena_len + need;
	size_t ncap = p->arena_cap + p->arena_cap / 2;
	if (ncap < want)
		ncap = want;
	if (ncap < 256)
		ncap = 256;
	char *a = realloc(p->arena, ncap);
	if (a == NULL)
		return false;
	p->arena = a;
	p->arena_cap = ncap;
	return true;
}

/* Room for need more bytes in the arena. */
static inline bool arena_reserve(struct resp_parser *p, size_t need)
{
	return p->arena_cap - p->arena_len >= need || arena_grow(p, need);
}

static bool argv_grow(struct resp_parser *p, size_t n)
{
	size_t ncap = p->argv_cap ? p->argv_cap * 2 : 8;
	while (ncap - p->argc < n)
		ncap *= 2;
	struct resp_arg *v = realloc(p->argv, ncap * sizeof(*v));
	if (v == NULL)
		return false;
	p->argv = v;
	p->argv_cap = ncap;
	return true;
}

/* Room for n more arguments. */
static inline bool argv_reserve(struct resp_parser *p, size_t n)
{
	return p->argv_cap - p->argc >= n || argv_grow(p, n);
}

/* Arguments are laid out back to back in the arena, each followed by a
 * NUL; pointers are set only now, as the arena may have moved while the
 * request was being built. */
static enum resp_status finish(struct resp_parser *p, int *argc, struct resp_arg **argv)
{
	size_t off = 0;

	for (size_t i = 0; i < p->argc; i++) {
		p->argv[i].p = p->arena + off;
		off += p->argv[i].len + 1;
	}
	p->returned = true;
	*argc = (int)p->argc;
	*argv = p->argv;
	return RESP_OK;
}

/* Forget the request handed out last time, and give back memory a large
 * one needed. */
static void reset_request(struct resp_parser *p)
{
	p->returned = false;
	p->argc = 0;
	p->arena_len = 0;
	if (p->arena_cap > KEEP_BYTES) {
		free(p->arena);
		p->arena = NULL;
		p->arena_cap = 0;
	}
	if (p->argv_cap > KEEP_ARGS) {
		free(p->argv);
		p->argv = NULL;
		p->argv_cap = 0;
	}
}

/* ---- hiredis object functions ----
 *
 * They build p->argv directly. Every object they "create" is the parser
 * itself: hiredis only checks objects for NULL and hands the root back from
 * redisReaderGetReply. By invariant (1) only a top-level array of bulk
 * strings reaches them; the refusals below are a second line of defence
 * and carry the text Redis would have sent.
 */

static void *cb_array(const redisReadTask *t, int elements)
{
	struct resp_parser *p = t->privdata;

	if (t->parent != NULL) {
		p->cb_err = "Protocol error: expected '$', got '*'";
		return NULL;
	}
	p->argc = 0;
	if (!argv_reserve(p, elements < 1024 ? (size_t)elements : 1024)) {
		p->cb_err = E_NOMEM;
		return NULL;
	}
	return p;
}

static void *cb_string(const redisReadTask *t, char *s, size_t len)
{
	struct resp_parser *p = t->privdata;

	if (t->parent == NULL || t->type != REDIS_REPLY_STRING) {
		p->cb_err = t->type == REDIS_REPLY_STATUS ? "Protocol error: expected '$', got '+'"
			  : t->type == REDIS_REPLY_ERROR  ? "Protocol error: expected '$', got '-'"
							  : E_MISMATCH;
		return NULL;
	}
	if (!argv_reserve(p, 1) || !arena_reserve(p, len + 1)) {
		p->cb_err = E_NOMEM;
		return NULL;
	}
	memcpy(p->arena + p->arena_len, s, len);
	p->arena[p->arena_len + len] = '\0';
	p->arena_len += len + 1;
	p->argv[p->argc].p = NULL; /* set by finish() */
	p->argv[p->argc].len = len;
	p->argc++;
	return p;
}

static void *cb_integer(const redisReadTask *t, long long v)
{
	struct resp_parser *p = t->privdata;

	(void)v;
	p->cb_err = "Protocol error: expected '$', got ':'";
	return NULL;
}

static void *cb_nil(const redisReadTask *t)
{
	struct resp_parser *p = t->privdata;

	p->cb_err = t->type == REDIS_REPLY_ARRAY ? "Protocol error: expected '$', got '*'" : E_BULK_LEN;
	return NULL;
}

static void cb_free(void *obj)
{
	(void)obj; /* objects are the parser itself; nothing to free */
}

static redisReplyObjectFunctions resp_hiredis_fn = {
	.createString = cb_string,
	.createArray = cb_array,
	.createInteger = cb_integer,
	.createNil = cb_nil,
	.freeObject = cb_free,
};

/* Turn a hiredis failure into a Redis text (see invariant (1)). */
static const char *hiredis_err(struct resp_parser *p)
{
	const char *e = p->rd->errstr;

	if (p->cb_err != NULL)
		return p->cb_err;
	if (p->rd->err == REDIS_ERR_OOM)
		return E_NOMEM;
	if (strstr(e, "ulti-bulk length") != NULL)
		return E_MBULK_LEN;
	if (strstr(e, "ulk string length") != NULL)
		return E_BULK_LEN;
	if (strstr(e, "nested multi bulk") != NULL)
		return "Protocol error: expected '$', got '*'";
	snprintf(p->errbuf, sizeof(p->errbuf), "Protocol error: %s", e);
	return p->errbuf;
}

/*
 * Hand in[head, scan) to hiredis and let it build what it can. @complete
 * says the framer saw the whole request end at scan: hiredis must then
 * return it, and must not before.
 */
static int hiredis_run(struct resp_parser *p, bool complete)
{
	size_t n = p->scan - p->head;
	void *reply = NULL;

	if (n == 0 && !complete)
		return 0;
	if (n > 0) {
		if (redisReaderFeed(p->rd, p->in + p->head, n) != REDIS_OK) {
			p->err = hiredis_err(p);
			return -1;
		}
		p->head = p->scan;
	}
	/* Every argument still to come lies in hiredis's unread bytes, so this
	 * reservation spares the callbacks any growth (and any failure). */
	if (!arena_reserve(p, p->rd->len - p->rd->pos)) {
		p->err = E_NOMEM;
		return -1;
	}
	if (redisReaderGetReply(p->rd, &reply) != REDIS_OK) {
		p->err = hiredis_err(p);
		return -1;
	}
	if ((reply != NULL) != complete) {
		p->err = E_MISMATCH;
		return -1;
	}
	return 0;
}

/* ---- the framer ---- */

/* Find the first '\r' of the header line at in[scan]; see "Line ends". */
static enum line_result find_line_end(struct resp_parser *p, size_t *cr)
{
	const char *b = p->in;
	size_t i;

	if (p->blocked)
		return LINE_NOCR;
	for (i = p->searched; i < p->tail; i++) {
		if (b[i] == '\r')
			break;
		if (b[i] == '\0') {
			p->blocked = true;
			return LINE_NOCR;
		}
	}
	p->searched = i;
	if (i == p->tail)
		return LINE_NOCR;
	if (i + 1 == p->tail)
		return LINE_WAIT;
	*cr = i;
	return LINE_OK;
}

/*
 * The common header: the type byte, a number with no sign and no leading
 * zero of at most 18 digits (so it cannot overflow), '\r' and one more
 * byte, all in the buffer. Returns the index of the '\r', or 0 for
 * anything else, which the general path then handles (partial lines,
 * errors, NULs). Both paths agree on every line this one accepts.
 */
static inline size_t fast_header(const struct resp_parser *p, long long *v)
{
	const char *b = p->in;
	size_t i = p->scan + 1, end = p->tail;
	unsigned long long x = 0;
	unsigned d;

	if (end - i < 3) /* a digit, '\r', one more byte */
		return 0;
	d = (unsigned)(unsigned char)b[i] - '0';
	if (d == 0) {
		i++;
	} else {
		size_t stop = end - i > 18 ? i + 18 : end;
		for (; i < stop && (d = (unsigned)(unsigned char)b[i] - '0') <= 9; i++)
			x = x * 10 + d;
		if (x == 0)
			return 0;
	}
	if (i + 1 >= end || b[i] != '\r')
		return 0;
	*v = (long long)x;
	return i;
}

/*
 * Read the header line at in[scan] ("*N" in FR_COUNT, "$len" in
 * FR_BULK_HDR) and move scan past it. LINE_OK: *v holds the number.
 * Otherwise either p->err is set (the line is bad, or it is still
 * incomplete past max_inline: @too_big), or more bytes are needed.
 */
static enum line_result read_header(struct resp_parser *p, long long *v, const char *too_big,
				    const char **errmsg)
{
	bool bulk = p->st == FR_BULK_HDR;
	size_t cr = 0;
	enum line_result lr;

	if (p->scan < p->tail && (!bulk || p->in[p->scan] == '$'))
		cr = fast_header(p, v);
	if (cr == 0) {
		lr = find_line_end(p, &cr);
		if (lr != LINE_OK) {
			if (lr == LINE_NOCR && p->tail - p->scan > p->lim.max_inline)
				fail(p, too_big, errmsg);
			return lr;
		}
		if (bulk && p->in[p->scan] != '$') {
			fail_expected(p, p->in[p->scan], errmsg);
			return LINE_NOCR;
		}
		if (!parse_ll(p->in + p->scan + 1, cr - p->scan - 1, v)) {
			fail(p, bulk ? E_BULK_LEN : E_MBULK_LEN, errmsg);
			return LINE_NOCR;
		}
	}
	p->in[cr + 1] = '\n'; /* see "Line ends" */
	p->scan = cr + 2;
	return LINE_OK;
}

static void start_line(struct resp_parser *p)
{
	p->searched = p->scan;
	p->blocked = false;
}

size_t resp_parser_pending(const struct resp_parser *p)
{
	size_t n = p->tail - p->head;

	if (p->rd != NULL && p->rd->err == 0)
		n += p->rd->len - p->rd->pos;
	return n;
}

/* No complete request: move what is validated into hiredis (so large
 * values do not sit in two buffers), then apply the query buffer limit to
 * what is left unparsed. */
static enum resp_status need_more(struct resp_parser *p, const char **errmsg)
{
	if ((p->st == FR_BULK_HDR || p->st == FR_BULK_BODY) && hiredis_run(p, false) < 0) {
		*errmsg = p->err;
		return RESP_ERR;
	}
	if (resp_parser_pending(p) > p->lim.max_query_buf)
		return fail(p, E_QBUF, errmsg);
	return RESP_AGAIN;
}

static enum resp_status next_inline(struct resp_parser *p, int *argc, struct resp_arg **argv,
				    const char **errmsg, bool *skipped)
{
	size_t from = p->searched, end, len, pos = 0, n;
	const char *nl = NULL;
	int r;

	if (!p->blocked && from < p->tail) {
		nl = memchr(p->in + from, '\n', p->tail - from);
		end = nl ? (size_t)(nl - p->in) : p->tail;
		if (memchr(p->in + from, '\0', end - from) != NULL) {
			p->blocked = true;
			nl = NULL;
		}
		p->searched = end;
	}
	if (nl == NULL) {
		if (p->tail - p->head > p->lim.max_inline)
			return fail(p, E_BIG_INLINE, errmsg);
		return need_more(p, errmsg);
	}
	end = (size_t)(nl - p->in);
	len = end - p->head;
	if (len > 0 && p->in[end - 1] == '\r')
		len--;
	if (!arena_reserve(p, len + 1))
		return fail(p, E_NOMEM, errmsg);
	while ((r = resp_inline_next(p->in + p->head, len, &pos, p->arena + p->arena_len, &n)) > 0) {
		if (!argv_reserve(p, 1))
			return fail(p, E_NOMEM, errmsg);
		p->argv[p->argc].p = NULL;
		p->argv[p->argc].len = n;
		p->argc++;
		p->arena_len += n + 1;
	}
	if (r < 0)
		return fail(p, E_QUOTES, errmsg);
	p->head = p->scan = end + 1;
	p->st = FR_IDLE;
	if (p->argc == 0) {
		*skipped = true; /* an empty line, as Redis skips it */
		return RESP_AGAIN;
	}
	return finish(p, argc, argv);
}

enum resp_status resp_parser_next(struct resp_parser *p, int *argc, struct resp_arg **argv,
				  const char **errmsg)
{
	long long v;

	if (p->err != NULL) {
		*errmsg = p->err;
		return RESP_ERR;
	}
	if (p->returned)
		reset_request(p);
	for (;;) {
		switch (p->st) {
		case FR_IDLE:
			if (p->head == p->tail)
				return RESP_AGAIN;
			p->scan = p->head;
			start_line(p);
			p->st = p->in[p->head] == '*' ? FR_COUNT : FR_INLINE;
			break;

		case FR_INLINE: {
			bool skipped = false;
			enum resp_status rs = next_inline(p, argc, argv, errmsg, &skipped);
			if (!skipped)
				return rs;
			break;
		}

		case FR_COUNT:
			if (read_header(p, &v, E_BIG_MBULK, errmsg) != LINE_OK)
				return p->err ? RESP_ERR : need_more(p, errmsg);
			if (v > INT_MAX || (v > 0 && (unsigned long long)v > p->lim.max_multibulk))
				return fail(p, E_MBULK_LEN, errmsg);
			if (v <= 0) {
				/* "*0", "*-1", "*-5": Redis reads nothing more and
				 * runs nothing; hiredis never sees the line. */
				p->head = p->scan;
				p->st = FR_IDLE;
				break;
			}
			p->args_left = v;
			p->st = FR_BULK_HDR;
			start_line(p);
			break;

		case FR_BULK_HDR:
			if (read_header(p, &v, E_BIG_BULK, errmsg) != LINE_OK)
				return p->err ? RESP_ERR : need_more(p, errmsg);
			if (v < 0 || (unsigned long long)v > p->lim.max_bulk_len)
				return fail(p, E_BULK_LEN, errmsg);
			p->body_left = (unsigned long long)v + 2;
			p->st = FR_BULK_BODY;
			break;

		case FR_BULK_BODY: {
			size_t avail = p->tail - p->scan;
			if (avail < p->body_left) {
				p->scan = p->tail;
				p->body_left -= avail;
				return need_more(p, errmsg);
			}
			p->scan += p->body_left;
			p->body_left = 0;
			if (--p->args_left > 0) {
				p->st = FR_BULK_HDR;
				start_line(p);
				break;
			}
			if (hiredis_run(p, true) < 0) {
				*errmsg = p->err;
				return RESP_ERR;
			}
			p->st = FR_IDLE;
			return finish(p, argc, argv);
		}
		}
	}
}

/* ---- input buffer ---- */

int resp_parser_feed(struct resp_parser *p, const char *buf, size_t len)
{
	size_t live, need;

	if (len == 0 || p->err != NULL)
		return 0;
	if (p->head == p->tail) {
		/* Everything was consumed: start over at 0, and give back a
		 * large buffer unless this feed needs it. */
		p->scan -= p->head;
		p->searched = p->searched > p->head ? p->searched - p->head : 0;
		p->head = p->tail = 0;
		if (p->cap > KEEP_BYTES && len <= KEEP_BYTES) {
			free(p->in);
			p->in = NULL;
			p->cap = 0;
		}
	}
	if (p->cap - p->tail < len) {
		live = p->tail - p->head;
		need = live + len;
		if (need < live)
			return -ENOMEM;
		if (p->head >= live && p->cap >= need) {
			/* The consumed prefix pays for the move: linear overall. */
			memmove(p->in, p->in + p->head, live);
		} else {
			size_t ncap = need + need / 2;
			if (ncap < MIN_IN_BUF)
				ncap = MIN_IN_BUF;
			char *nb = malloc(ncap);
			if (nb == NULL)
				return -ENOMEM;
			if (live > 0)
				memcpy(nb, p->in + p->head, live);
			free(p->in);
			p->in = nb;
			p->cap = ncap;
		}
		p->scan -= p->head;
		p->searched = p->searched > p->head ? p->searched - p->head : 0;
		p->tail = live;
		p->head = 0;
	}
	memcpy(p->in + p->tail, buf, len);
	p->tail += len;
	return 0;
}

struct resp_parser *resp_parser_create(const struct resp_limits *lim)
{
	struct resp_parser *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	if (lim != NULL)
		p->lim = *lim;
	if (p->lim.max_query_buf == 0)
		p->lim.max_query_buf = DEF_MAX_QUERY_BUF;
	if (p->lim.max_bulk_len == 0)
		p->lim.max_bulk_len = DEF_MAX_BULK_LEN;
	if (p->lim.max_multibulk == 0)
		p->lim.max_multibulk = DEF_MAX_MULTIBULK;
	if (p->lim.max_inline == 0)
		p->lim.max_inline = DEF_MAX_INLINE;
	p->rd = redisReaderCreateWithFunctions(&resp_hiredis_fn);
	if (p->rd == NULL) {
		free(p);
		return NULL;
	}
	/* Tasks copy the reader's privdata; the callbacks find us there. */
	p->rd->privdata = p;
	p->rd->maxbuf = HIREDIS_MAXBUF;
	p->st = FR_IDLE;
	return p;
}

void resp_parser_free(struct resp_parser *p)
{
	if (p == NULL)
		return;
	redisReaderFree(p->rd);
	free(p->in);
	free(p->argv);
	free(p->arena);
	free(p);
}
