/*
 * strutil: Redis 7.0 number and glob semantics (see strutil.h). The
 * accepted inputs and produced texts were checked case by case against a
 * real redis-server 7.0 (tests/unit/test_strutil.c keeps those cases).
 * Also the growable text buffer (srv_sbuf).
 */
#include "server/strutil.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int srv_str2ll(const char *s, size_t len, long long *out)
{
	unsigned long long v = 0, limit;
	bool neg = false;
	size_t i = 0;

	/* The 20-byte cap only bounds work: anything longer overflows or has
	 * a leading zero, so it would be refused below anyway. */
	if (len == 0 || len >= SRV_LL_STR_MAX)
		return -EINVAL;
	if (len == 1 && s[0] == '0') {
		if (out)
			*out = 0;
		return 0;
	}
	if (s[0] == '-') {
		neg = true;
		i = 1;
	}
	/* A leading zero is refused, which also refuses "-0" and "007". */
	if (i == len || s[i] < '1' || s[i] > '9')
		return -EINVAL;
	limit = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
	for (; i < len; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		d = (unsigned)(s[i] - '0');
		/* v * 10 + d <= limit, without overflowing. */
		if (v > (limit - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (out) {
		if (!neg)
			*out = (long long)v;
		else if (v == (unsigned long long)LLONG_MAX + 1)
			*out = LLONG_MIN;
		else
			*out = -(long long)v;
	}
	return 0;
}

int srv_str2ld(const char *s, size_t len, long double *out)
{
	char buf[SRV_LD_STR_MAX];
	long double v;
	char *end;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	/* strtold wants a NUL-terminated string; the copy also makes an
	 * embedded NUL visible as "not all bytes consumed". */
	memcpy(buf, s, len);
	buf[len] = '\0';
	/* strtold skips leading white space; Redis refuses it. */
	if (isspace((unsigned char)buf[0]))
		return -EINVAL;
	errno = 0;
	v = strtold(buf, &end);
	if (end != buf + len)
		return -EINVAL;
	/* Overflow (to +-HUGE_VALL) and underflow to zero are refused; a
	 * denormal result (ERANGE with a non-zero value) and a literal "inf"
	 * (no ERANGE) are accepted, as in Redis. */
	if (errno == ERANGE && (isinf(v) || v == 0))
		return -EINVAL;
	if (errno == EINVAL || isnan(v))
		return -EINVAL;
	if (out)
		*out = v;
	return 0;
}

int srv_ld2str(char *buf, size_t cap, long double v)
{
	int n;

	if (isinf(v)) {
		const char *t = v > 0 ? "inf" : "-inf";
		size_t tl = strlen(t);

		if (cap < tl + 1)
			return -ENOSPC;
		memcpy(buf, t, tl + 1);
		return (int)tl;
	}
	/* Fixed notation with 17 fraction digits: with an 80-bit long double
	 * this prints short decimal inputs back as typed once the trailing
	 * zeros go (0.1 + 0.2 prints "0.3"), which is what users see in Redis. */
	n = snprintf(buf, cap, "%.17Lf", v);
	if (n < 0 || (size_t)n >= cap)
		return -ENOSPC;
	if (memchr(buf, '.', (size_t)n)) {
		while (n > 0 && buf[n - 1] == '0')
			n--;
		if (n > 0 && buf[n - 1] == '.')
			n--;
	}
	/* A tiny negative value rounds to "-0.000..."; Redis prints it as 0. */
	if (n == 2 && buf[0] == '-' && buf[1] == '0') {
		buf[0] = '0';
		n = 1;
	}
	buf[n] = '\0';
	return n;
}

/* By hand: INCR and friends call this on every request. */
int srv_ll2str(char *buf, size_t cap, long long v)
{
	char tmp[24];
	unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
	int n = 0;
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		tmp[n++] = '-';
	if ((size_t)n >= cap)
		return -ENOSPC;
	for (int i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = '\0';
	return n;
}

/* ASCII-only case folding: the C locale's tolower, without its UB on
 * negative chars. */
static int fold(int ch)
{
	return (ch >= 'A' && ch <= 'Z') ? ch + ('a' - 'A') : ch;
}

static bool same_byte(char a, char b, bool nocase)
{
	return nocase ? fold((unsigned char)a) == fold((unsigned char)b) : a == b;
}

/*
 * Match a bracket set starting at p[0] == '[' against byte ch. *tlen gets
 * the pattern bytes the set spans (all of them when there is no closing
 * ']'). Ranges compare bounds and ch as (signed) char values, because that
 * is what Redis does and users can observe it with bytes >= 0x80.
 */
static bool set_match(const char *p, size_t plen, char ch, bool nocase, size_t *tlen)
{
	bool neg = false, hit = false;
	size_t i = 1;

	if (i < plen && p[i] == '^') {
		neg = true;
		i++;
	}
	for (;;) {
		if (i >= plen)
			break; /* unterminated: the set runs to the end */
		if (p[i] == '\\' && plen - i >= 2) {
			/* An escaped byte compares exactly, even with nocase. */
			if (p[i + 1] == ch)
				hit = true;
			i += 2;
		} else if (p[i] == ']') {
			i++;
			break;
		} else if (plen - i >= 3 && p[i + 1] == '-') {
			int lo = (signed char)p[i], hi = (signed char)p[i + 2];
			int c = (signed char)ch;

			if (lo > hi) {
				int t = lo;

				lo = hi;
				hi = t;
			}
			if (nocase) {
				lo = fold(lo);
				hi = fold(hi);
				c = fold(c);
			}
			if (c >= lo && c <= hi)
				hit = true;
			i += 3;
		} else {
			if (same_byte(p[i], ch, nocase))
				hit = true;
			i++;
		}
	}
	*tlen = i;
	return neg ? !hit : hit;
}

/* Match the one-byte token at p[0] (not '*') against ch; *tlen its length. */
static bool token_match(const char *p, size_t plen, char ch, bool nocase, size_t *tlen)
{
	switch (p[0]) {
	case '?':
		*tlen = 1;
		return true;
	case '[':
		return set_match(p, plen, ch, nocase, tlen);
	case '\\':
		if (plen >= 2) {
			*tlen = 2;
			return same_byte(p[1], ch, nocase);
		}
		/* A lone trailing backslash is itself. */
		*tlen = 1;
		return same_byte('\\', ch, nocase);
	default:
		*tlen = 1;
		return same_byte(p[0], ch, nocase);
	}
}

bool srv_strmatch(const char *pat, size_t plen, const char *str, size_t slen, bool nocase)
{
	size_t pi = 0, si = 0, tlen;
	size_t star_pi = SIZE_MAX, star_si = 0;

	/* Redis compares nothing when the string is empty: only an empty
	 * pattern matches it (so "*" does not; KEYS special-cases "*"). */
	if (slen == 0)
		return plen == 0;
	/*
	 * Every token but '*' consumes exactly one byte, so remembering only
	 * the most recent star and letting it absorb one more byte on each
	 * mismatch finds a match whenever one exists (an earlier star never
	 * needs to grow: the later star can absorb the same bytes). This keeps
	 * the worst case O(plen * slen) for patterns like "*a*a*a*b".
	 */
	while (si < slen) {
		if (pi < plen && pat[pi] == '*') {
			while (pi < plen && pat[pi] == '*')
				pi++;
			if (pi == plen)
				return true;
			star_pi = pi;
			star_si = si;
			continue;
		}
		if (pi < plen && token_match(pat + pi, plen - pi, str[si], nocase, &tlen)) {
			pi += tlen;
			si++;
			continue;
		}
		if (star_pi == SIZE_MAX)
			return false;
		pi = star_pi;
		si = ++star_si;
	}
	while (pi < plen && pat[pi] == '*')
		pi++;
	return pi == plen;
}

/* ---- growable text buffer ---- */

void srv_sbuf_printf(struct srv_sbuf *b, const char *fmt, ...)
{
	if (b->failed)
		return;
	size_t room = b->cap - b->len;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n >= room) {
		/* Too long for the room left: grow to fit, then print again
		 * (vsnprintf wrote at most room - 1 bytes and a NUL past len,
		 * which the second print overwrites). */
		size_t need = b->len + (size_t)n + 1;
		size_t cap = b->cap ? b->cap : SRV_SBUF_FIRST;
		while (cap < need)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			n = -1;
		} else {
			b->p = p;
			b->cap = cap;
			va_start(ap, fmt);
			n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
			va_end(ap);
		}
	}
	if (n < 0) {
		b->failed = true;
		if (b->p)
			b->p[b->len] = '\0'; /* drop what a truncated print left */
		return;
	}
	b->len += (size_t)n;
}

void srv_sbuf_free(struct srv_sbuf *b)
{
	free(b->p);
	*b = (struct srv_sbuf){ 0 };
}
