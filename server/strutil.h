/*
 * strutil: number parsing and formatting and glob matching with exactly the
 * semantics Redis 7.0 gives its commands, so replies match byte for byte.
 * These are protocol facts (which inputs are accepted, what text comes
 * out), written here from the documented behaviour and checked against a
 * real redis-server 7.0; none of Redis's code is used. Also the growable
 * text buffer that long replies (INFO, CLIENT LIST) are printed into.
 *
 * Every function but srv_sbuf_* is pure (no allocation, no global state
 * besides the C locale, which rckv never changes); srv_sbuf_* allocate and
 * touch only the buffer they are given. All may be called from any thread.
 */
#ifndef RCKV_SRV_STRUTIL_H
#define RCKV_SRV_STRUTIL_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Largest text srv_str2ld accepts (bytes, exclusive) and the buffer
 * srv_ld2str needs for any finite long double: the widest "%.17Lf" of an
 * 80-bit long double is about 4,950 characters.
 */
#define SRV_LD_STR_MAX 5120

/* Buffer for the decimal text of any long long, sign and NUL included. */
#define SRV_LL_STR_MAX 21

/*
 * srv_str2ll - parse a signed 64-bit decimal integer the way Redis parses
 * every integer argument and every stored value it increments: the whole of
 * s[0..len) must be an optional '-' followed by digits, with no leading
 * zeros (except "0" itself), no '+', no spaces, no "-0", at most 20 bytes,
 * and within [LLONG_MIN, LLONG_MAX].
 * @s:    the text (binary safe; need not be NUL-terminated)
 * @len:  its length
 * @out:  the value, written only on success (may be NULL)
 * Returns 0, or -EINVAL when the text is not such an integer (the caller
 * replies "ERR value is not an integer or out of range").
 */
int srv_str2ll(const char *s, size_t len, long long *out);

/*
 * srv_str2ld - parse a long double the way INCRBYFLOAT does: strtold()
 * must consume all of s[0..len), the text must not start with white space,
 * must be shorter than SRV_LD_STR_MAX, must not be NaN, and must neither
 * overflow nor underflow to zero ("inf" itself is accepted; denormals are
 * accepted). Hexadecimal floats ("0x10") are accepted, as strtold does.
 * Returns 0 with *out set, or -EINVAL ("ERR value is not a valid float").
 */
int srv_str2ld(const char *s, size_t len, long double *out);

/*
 * srv_ld2str - format a long double as INCRBYFLOAT replies it: "%.17Lf",
 * then trailing zeros of the fraction and a trailing '.' removed, "-0"
 * written as "0", infinities as "inf" / "-inf".
 * @buf: at least SRV_LD_STR_MAX bytes for any finite value
 * Returns the length written (NUL-terminated), or -ENOSPC if cap is too
 * small (buf then holds nothing useful).
 */
int srv_ld2str(char *buf, size_t cap, long double v);

/*
 * srv_ll2str - decimal text of v into buf (cap >= SRV_LL_STR_MAX always
 * suffices). Returns the length, or -ENOSPC.
 */
int srv_ll2str(char *buf, size_t cap, long long v);

/*
 * srv_strmatch - glob match with Redis's KEYS / SCAN MATCH / CONFIG GET
 * semantics, binary safe:
 *   *      any run of bytes (consecutive stars are one star)
 *   ?      any one byte
 *   [abc]  one byte of the set; [^abc] one byte not in it; [a-z] a range
 *          (reversed bounds are swapped; bounds compare as signed chars,
 *          as Redis does, so [a-\xff] means -1..'a'); \x escapes x inside;
 *          a set with no closing ']' runs to the end of the pattern
 *   \x     the byte x literally (a lone trailing '\' is a literal '\')
 *   other  itself (case-folded for ASCII letters when nocase)
 * Quirk kept on purpose: an empty string matches only the empty pattern
 * (Redis's KEYS special-cases the pattern "*" to list the empty key too;
 * callers do that themselves).
 * Time is O(plen * slen) at worst, never exponential.
 * Returns true when str matches pattern.
 */
bool srv_strmatch(const char *pat, size_t plen, const char *str, size_t slen, bool nocase);

/* Capacity of a srv_sbuf's first allocation; it doubles from there. */
#define SRV_SBUF_FIRST 4096

/*
 * struct srv_sbuf - a growable text buffer for printf-style appends.
 * Start from { 0 }; one buffer belongs to one caller at a time.
 * @p:      len bytes of text, then a NUL; NULL until the first append
 * @len:    bytes of text
 * @cap:    bytes allocated at p
 * @failed: an append failed (out of memory, or vsnprintf refused the
 *          format); the text stops before it, further appends do nothing,
 *          and the caller replies an error instead of the text
 */
struct srv_sbuf {
	char *p;
	size_t len, cap;
	bool failed;
};

/*
 * srv_sbuf_printf - append printf-formatted text to b, growing it as
 * needed (doubling from SRV_SBUF_FIRST bytes). Sets b->failed, and leaves
 * the text as it was, when memory runs out or the format fails.
 */
void srv_sbuf_printf(struct srv_sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* srv_sbuf_free - free b's text and make it empty again ({ 0 }). */
void srv_sbuf_free(struct srv_sbuf *b);

#endif
