/*
 * slowlog: Redis's slow log (SLOWLOG GET / LEN / RESET / HELP) for the
 * node: commands that ran longer than slowlog-log-slower-than
 * microseconds, newest first, at most slowlog-max-len of them.
 *
 * Threads: any worker; the log is the node's, under its own mutex, which
 * only a slow command (or SLOWLOG, or a threshold of 0) takes.
 */
#ifndef RCKV_SRV_SLOWLOG_H
#define RCKV_SRV_SLOWLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "resp/resp.h"

struct node;
struct client;

int slowlog_create(struct node *n);
void slowlog_destroy(struct node *n);

/* Would a command of `us` microseconds be logged (the threshold, read
 * with one relaxed load)? */
bool slowlog_wants(struct node *n, uint64_t us);

/*
 * slowlog_add - log a command of cl (argv as it sent it; trimmed as Redis
 * trims: at most 32 arguments, the last saying how many more, each at
 * most 128 bytes, saying how many more bytes). `note`, if not NULL, is
 * one more string after the arguments (a transaction's protocol and
 * retries: see slowlog.c). Owner worker of cl.
 */
void slowlog_add(struct node *n, const struct client *cl, int argc, const struct resp_arg *argv,
		 uint64_t us, const char *note);

#endif
