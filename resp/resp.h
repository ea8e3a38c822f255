/*
 * resp: the RESP codec. Requests are parsed with hiredis's redisReader
 * (custom object functions build an argv directly) for multibulk requests,
 * and by a small parser of our own for inline commands. Replies are written
 * in RESP2, or RESP3 after HELLO 3.
 *
 * Threads: a parser and a writer belong to one connection (one worker).
 */
#ifndef RCKV_RESP_H
#define RCKV_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One argument of a request: binary-safe, NOT NUL-terminated in general
 * (but the parser does NUL-terminate each one for convenience). */
struct resp_arg {
	char *p;
	size_t len;
};

struct resp_limits {
	size_t max_query_buf;  /* client-query-buffer-limit: unparsed bytes held */
	size_t max_bulk_len;   /* proto-max-bulk-len: largest bulk string */
	size_t max_multibulk;  /* largest number of arguments (Redis: 1024*1024) */
	size_t max_inline;     /* largest inline request line (Redis: 64 KiB) */
};

enum resp_status {
	RESP_OK = 0,    /* a request was returned */
	RESP_AGAIN = 1, /* need more bytes */
	RESP_ERR = -1,  /* protocol error: reply errmsg, then close the connection */
};

struct resp_parser;

struct resp_parser *resp_parser_create(const struct resp_limits *lim);
void resp_parser_free(struct resp_parser *p);

/* Append bytes read from the socket. Returns 0 or -ENOMEM. */
int resp_parser_feed(struct resp_parser *p, const char *buf, size_t len);

/*
 * resp_parser_next - take the next complete request.
 * On RESP_OK: argc and argv hold the request; they stay valid until the next
 * call to resp_parser_next or resp_parser_free. An empty inline line is
 * skipped (as Redis does), never returned with argc 0.
 * On RESP_ERR: *errmsg is the exact Redis error text without the "-ERR "
 * prefix, e.g. "Protocol error: invalid bulk length"; the parser is then
 * unusable and the caller must reply and close.
 * Limits: a declared bulk length over max_bulk_len, a multibulk count over
 * max_multibulk, an inline line over max_inline, or more than max_query_buf
 * unparsed bytes are errors as soon as they are seen (before the data
 * arrives). Nested arrays are a protocol error, as in Redis.
 */
enum resp_status resp_parser_next(struct resp_parser *p, int *argc, struct resp_arg **argv,
				  const char **errmsg);

/* Bytes buffered but not yet returned as requests (for CLIENT LIST qbuf). */
size_t resp_parser_pending(const struct resp_parser *p);

/* ---- replies ---- */

struct resp_w {
	char *p;
	size_t len, cap;
	int proto; /* 2 or 3 */
};

void resp_w_init(struct resp_w *w, int proto);
void resp_w_free(struct resp_w *w);
void resp_w_reset(struct resp_w *w);  /* len = 0, keeps memory and proto */
void resp_w_raw(struct resp_w *w, const void *p, size_t len);
void resp_w_append(struct resp_w *dst, const struct resp_w *src);

void resp_status(struct resp_w *w, const char *s);           /* +s */
void resp_error(struct resp_w *w, const char *s);            /* -s (s includes the code, e.g. "ERR ...") */
void resp_errorf(struct resp_w *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void resp_int(struct resp_w *w, long long v);                /* :v */
void resp_bulk(struct resp_w *w, const void *p, size_t len); /* $len */
void resp_bulk_cstr(struct resp_w *w, const char *s);
void resp_bulk_ll(struct resp_w *w, long long v);            /* integer as a bulk string */
void resp_null(struct resp_w *w);                            /* $-1 or _ */
void resp_null_array(struct resp_w *w);                      /* *-1 or _ */
void resp_array(struct resp_w *w, long n);                   /* *n */
void resp_push(struct resp_w *w, long n);                    /* >n, or *n in RESP2 (Pub/Sub) */
void resp_map(struct resp_w *w, long n);                     /* %n, or *2n in RESP2 */
void resp_set(struct resp_w *w, long n);                     /* ~n, or *n in RESP2 */
void resp_double(struct resp_w *w, double d);                /* ,d or bulk in RESP2 */
void resp_bool(struct resp_w *w, bool b);                    /* #t/#f, or :1/:0 */
void resp_verbatim(struct resp_w *w, const char *p, size_t len); /* =len txt:, or bulk */

/*
 * Human long doubles, the form of INCRBYFLOAT and HINCRBYFLOAT results
 * (Redis's ld2string LD_STR_HUMAN): "%.17Lf" without trailing zeros or a
 * trailing '.', "-0" as "0", infinities as "inf" / "-inf". Those commands
 * reply with a bulk string in RESP2 and RESP3 alike, and store the same
 * text as the new value.
 * resp_ld_human writes the text and a NUL into buf (cap bytes; cap =
 * RESP_LD_HUMAN_MAX always suffices) and returns its length, or 0 when it
 * does not fit. resp_bulk_ld_human replies with it as a bulk string.
 * Threads: any (resp_ld_human is pure).
 */
#define RESP_LD_HUMAN_MAX 5120
size_t resp_ld_human(char *buf, size_t cap, long double v);
void resp_bulk_ld_human(struct resp_w *w, long double v);

#endif
