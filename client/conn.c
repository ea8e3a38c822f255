/*
 * conn.c: connections and error names for librckv.
 */
#include "client/rckv.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>

const char *rckv_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case RCKV_ECONNECT:
		return "connection failed";
	case RCKV_EREPLY:
		return "error reply from the server";
	case RCKV_EPROTO:
		return "unexpected reply from the server";
	case RCKV_ENOTRCKV:
		return "the server is not rckv (no RCKV command)";
	case RCKV_EPARSE:
		return "malformed cluster file";
	case RCKV_ERANGE:
		return "value out of range";
	default:
		return err < 0 ? strerror(-err) : "unknown error";
	}
}

redisContext *rckv_connect(const char *host, int port, int timeout_ms, char *err, size_t errlen)
{
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	redisContext *c = redisConnectWithTimeout(host, port, tv);

	if (!c) {
		if (err && errlen)
			snprintf(err, errlen, "%s:%d: out of memory", host, port);
		return NULL;
	}
	if (c->err) {
		if (err && errlen)
			snprintf(err, errlen, "%s:%d: %s", host, port, c->errstr);
		redisFree(c);
		return NULL;
	}
	/* the same bound on every later read and write, so a hung server is
	 * an error rather than a hang */
	if (redisSetTimeout(c, tv) != REDIS_OK) {
		if (err && errlen)
			snprintf(err, errlen, "%s:%d: cannot set timeout: %s", host, port, c->errstr);
		redisFree(c);
		return NULL;
	}
	return c;
}
