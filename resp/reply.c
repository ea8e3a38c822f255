/*
 * reply.c: the reply writer (resp_w and resp_*), RESP2 and RESP3.
 *
 * Every reply type has the bytes Redis 7.0 writes for it, in the protocol
 * the connection negotiated (HELLO 3 switches to RESP3):
 *
 *   call             RESP2                    RESP3
 *   resp_null        $-1\r\n                  _\r\n
 *   resp_null_array  *-1\r\n                  _\r\n
 *   resp_map(n)      *<2n>\r\n                %<n>\r\n
 *   resp_set(n)      *<n>\r\n                 ~<n>\r\n
 *   resp_double(d)   $<len>\r\n<%.17g>\r\n    ,<%.17g>\r\n   (addReplyDouble)
 *   resp_bool(b)     :1 / :0                  #t / #f
 *   resp_verbatim    $<len>\r\n<txt>\r\n      =<len+4>\r\ntxt:<txt>\r\n
 *
 * Integers and lengths are formatted by hand (fmt_u64), not by snprintf:
 * they are on every reply's path.
 *
 * Memory: the buffer grows by doubling and never shrinks by itself
 * (resp_w_reset keeps it). An allocation failure aborts the process with a
 * message: a reply cannot be half-written, and every caller would
 * otherwise need a failure path for what Redis also treats as fatal.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp/resp.h"

static void w_grow(struct resp_w *w, size_t need)
{
	size_t want = w->len + need;
	size_t ncap = w->cap ? w->cap : 256;

	if (want < w->len)
		goto oom;
	while (ncap < want) {
		if (ncap > SIZE_MAX / 2)
			goto oom;
		ncap *= 2;
	}
	char *np = realloc(w->p, ncap);
	if (np == NULL)
		goto oom;
	w->p = np;
	w->cap = ncap;
	return;
oom:
	fprintf(stderr, "resp: out of memory growing a reply buffer to %zu bytes\n", want);
	abort();
}

/* Room for n more bytes; returns where they go. */
static inline char *w_room(struct resp_w *w, size_t n)
{
	if (w->cap - w->len < n)
		w_grow(w, n);
	return w->p + w->len;
}

static const char digit_pairs[] =
	"00010203040506070809"
	"10111213141516171819"
	"20212223242526272829"
	"30313233343536373839"
	"40414243444546474849"
	"50515253545556575859"
	"60616263646566676869"
	"70717273747576777879"
	"80818283848586878889"
	"90919293949596979899";

static inline size_t u64_digits(uint64_t v)
{
	size_t n = 1;

	for (;;) {
		if (v < 10)
			return n;
		if (v < 100)
			return n + 1;
		if (v < 1000)
			return n + 2;
		if (v < 10000)
			return n + 3;
		v /= 10000;
		n += 4;
	}
}

/* Decimal digits of v at dst; returns their count (at most 20). */
static inline size_t fmt_u64(char *dst, uint64_t v)
{
	size_t n = u64_digits(v);
	char *q = dst + n;

	while (v >= 100) {
		unsigned i = (unsigned)(v % 100) * 2;
		v /= 100;
		*--q = digit_pairs[i + 1];
		*--q = digit_pairs[i];
	}
	if (v >= 10) {
		*--q = digit_pairs[v * 2 + 1];
		*--q = digit_pairs[v * 2];
	} else {
		*--q = (char)('0' + v);
	}
	return n;
}

static inline size_t fmt_ll(char *dst, long long v)
{
	if (v < 0) {
		dst[0] = '-';
		return 1 + fmt_u64(dst + 1, 0 - (uint64_t)v);
	}
	return fmt_u64(dst, (uint64_t)v);
}

/* <type><v>\r\n: integers, and the headers of bulks and aggregates. */
static inline void w_line_ll(struct resp_w *w, char type, long long v)
{
	char *q = w_room(w, 1 + 20 + 2);
	size_t n = 1;

	q[0] = type;
	n += fmt_ll(q + 1, v);
	q[n] = '\r';
	q[n + 1] = '\n';
	w->len += n + 2;
}

/* <type><s>\r\n for a string s of known length. */
static void w_line_str(struct resp_w *w, char type, const char *s, size_t len)
{
	char *q = w_room(w, len + 3);

	q[0] = type;
	memcpy(q + 1, s, len);
	q[len + 1] = '\r';
	q[len + 2] = '\n';
	w->len += len + 3;
}

void resp_w_init(struct resp_w *w, int proto)
{
	w->p = NULL;
	w->len = 0;
	w->cap = 0;
	w->proto = proto == 3 ? 3 : 2;
}

void resp_w_free(struct resp_w *w)
{
	free(w->p);
	w->p = NULL;
	w->len = 0;
	w->cap = 0;
}

void resp_w_reset(struct resp_w *w)
{
	w->len = 0;
}

void resp_w_raw(struct resp_w *w, const void *p, size_t len)
{
	if (len == 0)
		return;
	memcpy(w_room(w, len), p, len);
	w->len += len;
}

void resp_w_append(struct resp_w *dst, const struct resp_w *src)
{
	resp_w_raw(dst, src->p, src->len);
}

void resp_status(struct resp_w *w, const char *s)
{
	w_line_str(w, '+', s, strlen(s));
}

/* An error line must stay one line: '\r' and '\n' become spaces, as Redis
 * does (addReplyErrorFormat). */
static void map_newlines(char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] == '\r' || s[i] == '\n')
			s[i] = ' ';
}

void resp_error(struct resp_w *w, const char *s)
{
	size_t len;

	if (s[0] == '-')
		s++; /* the caller already wrote the '-' */
	len = strlen(s);
	w_line_str(w, '-', s, len);
	map_newlines(w->p + w->len - len - 2, len);
}

void resp_errorf(struct resp_w *w, const char *fmt, ...)
{
	va_list ap, ap2;
	size_t room = 128;
	char *q;
	int n;

	va_start(ap, fmt);
	va_copy(ap2, ap);
	q = w_room(w, room + 3);
	n = vsnprintf(q + 1, room + 1, fmt, ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > room) {
		q = w_room(w, (size_t)n + 3);
		vsnprintf(q + 1, (size_t)n + 1, fmt, ap2);
	}
	va_end(ap2);
	va_end(ap);

	/* Like Redis: strip CR/LF at both ends, then map the ones inside. */
	char *s = q + 1;
	size_t len = (size_t)n, skip = 0;
	while (len > 0 && (s[len - 1] == '\r' || s[len - 1] == '\n'))
		len--;
	while (skip < len && (s[skip] == '\r' || s[skip] == '\n'))
		skip++;
	if (skip > 0)
		memmove(s, s + skip, len - skip);
	len -= skip;
	if (len > 0 && s[0] == '-') {
		/* the code came with its own '-' */
		memmove(s, s + 1, len - 1);
		len--;
	}
	map_newlines(s, len);
	q[0] = '-';
	q[len + 1] = '\r';
	q[len + 2] = '\n';
	w->len += len + 3;
}

void resp_int(struct resp_w *w, long long v)
{
	w_line_ll(w, ':', v);
}

void resp_bulk(struct resp_w *w, const void *p, size_t len)
{
	char *q = w_room(w, 1 + 20 + 2 + len + 2);
	size_t n = 1;

	q[0] = '$';
	n += fmt_u64(q + 1, len);
	q[n++] = '\r';
	q[n++] = '\n';
	memcpy(q + n, p, len);
	n += len;
	q[n++] = '\r';
	q[n++] = '\n';
	w->len += n;
}

void resp_bulk_cstr(struct resp_w *w, const char *s)
{
	if (s == NULL)
		resp_null(w); /* as Redis's addReplyBulkCString(NULL) */
	else
		resp_bulk(w, s, strlen(s));
}

void resp_bulk_ll(struct resp_w *w, long long v)
{
	char buf[21];
	size_t n = fmt_ll(buf, v);
	char *q = w_room(w, 4 + 2 + n + 2);

	/* n <= 20, so the length has one or two digits */
	q[0] = '$';
	size_t h = 1 + fmt_u64(q + 1, n);
	q[h++] = '\r';
	q[h++] = '\n';
	memcpy(q + h, buf, n);
	h += n;
	q[h++] = '\r';
	q[h++] = '\n';
	w->len += h;
}

void resp_null(struct resp_w *w)
{
	if (w->proto == 3)
		resp_w_raw(w, "_\r\n", 3);
	else
		resp_w_raw(w, "$-1\r\n", 5);
}

void resp_null_array(struct resp_w *w)
{
	if (w->proto == 3)
		resp_w_raw(w, "_\r\n", 3);
	else
		resp_w_raw(w, "*-1\r\n", 5);
}

void resp_array(struct resp_w *w, long n)
{
	w_line_ll(w, '*', n);
}

void resp_push(struct resp_w *w, long n)
{
	w_line_ll(w, w->proto == 3 ? '>' : '*', n);
}

void resp_map(struct resp_w *w, long n)
{
	if (w->proto == 3)
		w_line_ll(w, '%', n);
	else
		w_line_ll(w, '*', (long long)n * 2);
}

void resp_set(struct resp_w *w, long n)
{
	w_line_ll(w, w->proto == 3 ? '~' : '*', n);
}

/* Redis 7.0's addReplyDouble: "%.17g", with infinities spelled by hand
 * ("inf", "-inf") since libcs disagree on them. */
void resp_double(struct resp_w *w, double d)
{
	char buf[64];
	int n;

	if (isinf(d))
		n = snprintf(buf, sizeof(buf), "%s", d > 0 ? "inf" : "-inf");
	else
		n = snprintf(buf, sizeof(buf), "%.17g", d);
	if (w->proto == 3)
		w_line_str(w, ',', buf, (size_t)n);
	else
		resp_bulk(w, buf, (size_t)n);
}

void resp_bool(struct resp_w *w, bool b)
{
	if (w->proto == 3)
		resp_w_raw(w, b ? "#t\r\n" : "#f\r\n", 4);
	else
		resp_w_raw(w, b ? ":1\r\n" : ":0\r\n", 4);
}

void resp_verbatim(struct resp_w *w, const char *p, size_t len)
{
	if (w->proto != 3) {
		resp_bulk(w, p, len);
		return;
	}
	w_line_ll(w, '=', (long long)(len + 4));
	char *q = w_room(w, 4 + len + 2);
	memcpy(q, "txt:", 4);
	memcpy(q + 4, p, len);
	q[4 + len] = '\r';
	q[4 + len + 1] = '\n';
	w->len += 4 + len + 2;
}

/*
 * Redis's ld2string in LD_STR_HUMAN mode (INCRBYFLOAT, HINCRBYFLOAT):
 * "%.17Lf", then trailing zeros and a trailing '.' dropped, "-0" -> "0",
 * infinities as "inf" / "-inf".
 */
size_t resp_ld_human(char *buf, size_t cap, long double v)
{
	int n;
	size_t l;

	if (isinf(v)) {
		const char *s = v > 0 ? "inf" : "-inf";
		l = strlen(s);
		if (l + 1 > cap)
			return 0;
		memcpy(buf, s, l + 1);
		return l;
	}
	n = snprintf(buf, cap, "%.17Lf", v);
	if (n < 0 || (size_t)n + 1 > cap)
		return 0;
	l = (size_t)n;
	if (memchr(buf, '.', l) != NULL) {
		while (buf[l - 1] == '0')
			l--;
		if (buf[l - 1] == '.')
			l--;
	}
	if (l == 2 && buf[0] == '-' && buf[1] == '0') {
		buf[0] = '0';
		l = 1;
	}
	buf[l] = '\0';
	return l;
}

void resp_bulk_ld_human(struct resp_w *w, long double v)
{
	char buf[RESP_LD_HUMAN_MAX];
	size_t n = resp_ld_human(buf, sizeof(buf), v);

	resp_bulk(w, buf, n);
}
