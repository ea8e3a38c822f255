/*
 * inline.c: the splitter for inline requests ("SET k v\r\n" typed into
 * telnet or redis-cli's raw mode). It reproduces the rules of Redis 7.0's
 * sdssplitargs byte for byte, because clients see its results:
 *
 *   - blanks between arguments are the isspace() set of the C locale:
 *     space, \t, \n, \v, \f, \r;
 *   - an unquoted argument ends at space, \t, \n or \r only (so \v and \f
 *     belong to it), and a quote inside it opens a quoted part: a"b c" is
 *     the single argument `ab c`;
 *   - inside double quotes: \xHH (two hex digits) is that byte, \n \r \t \b
 *     \a are the control characters, a backslash before any other byte
 *     yields that byte (\" \\ \q -> " \ q);
 *   - inside single quotes only \' is an escape;
 *   - a closing quote must be followed by a blank or the end of the line,
 *     and a quote left open at the end of the line is an error; both are
 *     reported as "unbalanced quotes in request".
 */
#include <stdbool.h>

#include "resp/resp_internal.h"

static bool is_blank(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* The bytes that end an unquoted argument (a narrower set than is_blank). */
static bool ends_arg(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int hex_val(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static char unescape(unsigned char c)
{
	switch (c) {
	case 'n': return '\n';
	case 'r': return '\r';
	case 't': return '\t';
	case 'b': return '\b';
	case 'a': return '\a';
	default: return (char)c;
	}
}

int resp_inline_next(const char *line, size_t len, size_t *pos, char *out, size_t *outlen)
{
	const unsigned char *s = (const unsigned char *)line;
	size_t i = *pos, o = 0;
	enum { BARE, DQUOTE, SQUOTE } mode = BARE;

	while (i < len && is_blank(s[i]))
		i++;
	if (i == len) {
		*pos = i;
		return 0;
	}
	for (;;) {
		if (i == len) {
			if (mode != BARE)
				return -1; /* the line ended inside quotes */
			break;
		}
		unsigned char c = s[i];
		if (mode == DQUOTE) {
			int hi, lo;
			if (c == '\\' && i + 3 < len && s[i + 1] == 'x' &&
			    (hi = hex_val(s[i + 2])) >= 0 && (lo = hex_val(s[i + 3])) >= 0) {
				out[o++] = (char)(hi * 16 + lo);
				i += 4;
			} else if (c == '\\' && i + 1 < len) {
				out[o++] = unescape(s[i + 1]);
				i += 2;
			} else if (c == '"') {
				if (i + 1 < len && !is_blank(s[i + 1]))
					return -1; /* "a"b */
				i++;
				break;
			} else {
				out[o++] = (char)c;
				i++;
			}
		} else if (mode == SQUOTE) {
			if (c == '\\' && i + 1 < len && s[i + 1] == '\'') {
				out[o++] = '\'';
				i += 2;
			} else if (c == '\'') {
				if (i + 1 < len && !is_blank(s[i + 1]))
					return -1;
				i++;
				break;
			} else {
				out[o++] = (char)c;
				i++;
			}
		} else {
			i++;
			if (ends_arg(c))
				break;
			if (c == '"')
				mode = DQUOTE;
			else if (c == '\'')
				mode = SQUOTE;
			else
				out[o++] = (char)c;
		}
	}
	out[o] = '\0';
	*outlen = o;
	*pos = i;
	return 1;
}
