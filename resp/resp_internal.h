/*
 * resp_internal.h: declarations shared by the files of resp/ only. Nothing
 * outside resp/ includes this header.
 */
#ifndef RCKV_RESP_INTERNAL_H
#define RCKV_RESP_INTERNAL_H

#include <stddef.h>

/*
 * resp_inline_next - cut the next argument out of an inline request line,
 * with the rules of Redis's sdssplitargs (see inline.c).
 * @line, @len: the line without its "\n" / "\r\n"; it holds no NUL byte
 *	(request.c never completes a line with a NUL in it, as Redis never does).
 * @pos:    in/out cursor into @line; start at 0.
 * @out:    where the argument's bytes go, followed by a NUL. The caller
 *	guarantees room for len - *pos + 1 bytes: an argument never expands.
 * @outlen: the argument's length, without the NUL.
 * Returns 1 when an argument was produced, 0 at the end of the line, -1 when
 * the quotes are unbalanced (Redis: "unbalanced quotes in request").
 * Threads: pure function.
 */
int resp_inline_next(const char *line, size_t len, size_t *pos, char *out, size_t *outlen);

#endif
