/*
 * client: one client connection. Owned by one worker for its whole life;
 * every field is written by that worker only (the _st rule), except where
 * noted. CLIENT LIST on another worker reads the listed fields under the
 * owner's clients_lock (worker.h).
 */
#ifndef RCKV_SRV_CLIENT_H
#define RCKV_SRV_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "resp/resp.h"

struct worker;
struct coro;
struct ps_client;

enum {
	CL_MULTI = 1u << 0,        /* between MULTI and EXEC/DISCARD */
	CL_DIRTY_EXEC = 1u << 1,   /* a queue-time error: EXEC replies EXECABORT */
	CL_CLOSE_AFTER_REPLY = 1u << 2, /* QUIT, protocol error */
	CL_CLOSE_ASAP = 1u << 3,   /* CLIENT KILL, write error */
	CL_RUNNING = 1u << 4,      /* a coroutine is processing this client */
	CL_PUBSUB = 1u << 5,       /* has a (P|S)SUBSCRIBE subscription (server/pubsub.h) */
	CL_MONITOR = 1u << 6,      /* MONITOR: gets every command's line (server/monitor.c) */
};

/* A command queued between MULTI and EXEC: its own copy of the arguments. */
struct queued_cmd {
	const struct cmd_def *def;
	int argc;
	struct resp_arg *argv; /* one allocation holds argv and the bytes */
};

/* Pipelined write commands waiting to run as one transaction
 * (server/dispatch.c, "Groups"). Their argv live in `buf`, at `off`: a
 * struct resp_arg[argc] then the bytes; the pointers are set when run. */
#define SRV_GROUP_MAX 32
struct group_cmd {
	const struct cmd_def *def;
	int argc;
	size_t off;
};

/* A watched key with the version WATCH saw. */
struct watched_key {
	char *key;
	size_t klen;
	uint64_t ver;
	bool alive; /* there at WATCH: its expiry later fails EXEC (Redis 7) */
};

struct client {
	uint64_t id;
	int fd;
	struct worker *w;
	char addr[64];      /* ip:port of the peer */
	char laddr[64];     /* ip:port of our end */
	char *name;         /* CLIENT SETNAME; NULL if none */
	char *lib_name;     /* CLIENT SETINFO lib-name */
	char *lib_ver;      /* CLIENT SETINFO lib-ver */
	int proto;          /* 2, or 3 after HELLO 3 */
	bool authed;        /* true when the default user is nopass or AUTH succeeded */
	/* The user's permissions (server/acl.h) and the ACL generation they
	 * are current at; replaced by the owner under its clients_lock
	 * (acl_client_set), which CLIENT LIST on other workers holds to read
	 * perm->name. */
	struct acl_perm *perm;
	uint64_t acl_gen;
	uint32_t flags;     /* CL_* */
	int resp_limit_hit;

	struct resp_parser *parser;
	struct resp_w out;  /* replies not yet written to the socket */
	size_t out_sent;    /* bytes of out already written */
	time_t obuf_soft_since; /* over client-output-buffer-limit normal's soft
				   limit since then; 0: under it (conn.c) */

	struct queued_cmd *mq; /* MULTI queue */
	int mq_len, mq_cap;
	struct watched_key *watched;
	int nwatched, watched_cap;

	struct group_cmd grp[SRV_GROUP_MAX]; /* pipelined writes not yet run */
	int ngrp;
	char *gbuf;
	size_t glen, gcap;

	time_t ctime;       /* connect time */
	time_t last_active; /* last command time */
	const char *last_cmd; /* name of the last command run */

	struct ps_client *ps; /* subscriptions, NULL until the first (server/pubsub.c) */
	long nsubs[3];        /* their number per enum ps_kind: CLIENT LIST reads it */
	struct resp_w psq;    /* PUBLISHes of a running EXEC, sent at commit (ps_defer) */
	int txn_retries;      /* of the last command's transaction: attempts - 1 (SLOWLOG) */
	bool reply_off;       /* CLIENT REPLY OFF */
	bool reply_skip;      /* CLIENT REPLY SKIP: no reply to the next command */

	struct client *prev, *next; /* the worker's client list */
	bool in_ready;      /* queued on the worker's ready list */
	bool more_input;    /* bytes arrived while its coroutine ran */
	struct client *ready_next;
	bool in_wlist;      /* queued on the worker's pending-write list */
	struct client *wnext;
};

/* Forget WATCHed keys (UNWATCH, EXEC, DISCARD, RESET). */
void client_unwatch(struct client *cl);
/* Free the MULTI queue and leave MULTI state. */
void client_discard_multi(struct client *cl);
/* Append cl's CLIENT LIST line (no '\n') to b. Owner worker. */
struct srv_sbuf;
void client_info_line(struct srv_sbuf *b, const struct client *cl);

#endif
