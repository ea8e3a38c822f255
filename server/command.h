/*
 * command: the command table (Redis-style rows) and the handler contract.
 *
 * Dispatch (server/dispatch.c) looks the name up case-insensitively, checks
 * arity (n > 0: exactly n arguments including the name; n < 0: at least -n),
 * authentication and MULTI queueing by flags, then runs the handler:
 *  - without CMD_NOTXN, inside a transaction (ctx->txn != NULL). The handler
 *    reads and writes keys only through cc/txn.h. If a txn_* call returns
 *    CC_ABORT the handler returns CC_ABORT at once, writing nothing more;
 *    the executor retries the whole transaction, so a handler must have no
 *    side effects outside the transaction and its reply buffer.
 *  - with CMD_NOTXN, directly (ctx->txn may be NULL, or non-NULL when the
 *    command was queued in MULTI; such handlers ignore it).
 * A handler writes exactly one reply to ctx->out and returns 0 (or CC_ABORT).
 */
#ifndef RCKV_SRV_COMMAND_H
#define RCKV_SRV_COMMAND_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "resp/resp.h"

/* The Redis version whose commands and replies rckv follows, as clients see
 * it (INFO, HELLO, a script's redis.REDIS_VERSION): they gate features on
 * it (RESP3, ...). */
#define SRV_REDIS_VERSION "7.0.15"

struct node;
struct worker;
struct client;
struct txn;

/* Is argument a the option word `word` (ASCII, any case)? */
static inline bool arg_is(const struct resp_arg *a, const char *word)
{
	size_t n = strlen(word);
	return a->len == n && strncasecmp(a->p, word, n) == 0;
}

struct cmd_ctx {
	struct node *node;
	struct worker *w;
	struct client *cl;
	struct txn *txn;
	int argc;
	struct resp_arg *argv;
	struct resp_w *out;
	bool failed; /* set by cmd_reply_txn_error: roll the command's writes back */
	uint8_t ktype; /* cmd_read_key1: the type of what key 1 holds (a reply1 checks it) */
	/* Set by a handler whose keyspace event names a key that depends on
	 * the data (LMPOP, BLPOP: the list it popped from): argv index (0:
	 * none) and event. notify_pre clears them; notify_post reads them. */
	int ev_key;
	const char *ev_name;
	/* Set by a blocking list command that found nothing (cmd_list.c), its
	 * timeout reply written: srv_dispatch parks the client and runs the
	 * command again until it finds an element or block_ms passes (0:
	 * forever). */
	bool would_block;
	int64_t block_ms;
};

typedef int (*cmd_handler)(struct cmd_ctx *c);

/* The reply of a command that reads one key, given what the key holds
 * (found, and then its value). */
typedef void (*cmd_reply1)(struct cmd_ctx *c, bool found, const char *v, size_t vlen);

/* Flags: policy is decided by these, never by comparing handlers. */
enum {
	CMD_WRITE = 1u << 0,    /* may modify data */
	CMD_READONLY = 1u << 1, /* reads data only */
	CMD_ADMIN = 1u << 2,    /* administrative */
	CMD_NOTXN = 1u << 3,    /* runs outside the transaction machinery */
	CMD_NOMULTI = 1u << 4,  /* "Command not allowed inside a transaction" */
	CMD_NOAUTH = 1u << 5,   /* allowed before AUTH */
	CMD_FAST = 1u << 6,     /* O(1) or O(log N) */
	CMD_LOADING = 1u << 7,
	CMD_STALE = 1u << 8,
	CMD_NOSCRIPT = 1u << 9,
	CMD_ALLKEYS = 1u << 10, /* touches the whole keyspace (KEYS, SCAN, FLUSH*) */
	CMD_MULTICTL = 1u << 11,/* MULTI/EXEC/DISCARD/WATCH/QUIT/RESET: run even while queueing */
	/* Reported by COMMAND INFO only (Redis 7.0 flag names). */
	CMD_DENYOOM = 1u << 12,     /* "denyoom": may grow memory use */
	CMD_SKIP_SLOWLOG = 1u << 13,/* "skip_slowlog" */
	CMD_ALLOW_BUSY = 1u << 14,  /* "allow_busy" */
	CMD_SKIP_MONITOR = 1u << 15,/* "skip_monitor" */
	CMD_NO_MANDATORY_KEYS = 1u << 16, /* "no_mandatory_keys" */
	CMD_MOVABLEKEYS = 1u << 17, /* "movablekeys": keys found by getkeys */
	CMD_SCRIPT_NOTXN = 1u << 18,/* CMD_NOTXN, yet a script may call it: it reads
				       nothing of the keyspace (PING, ECHO, TIME,
				       LASTSAVE, MOVE), or reads it only through
				       cmd_ctx.txn when that is set, as queued in
				       MULTI (OBJECT, RANDOMKEY): in a script, the
				       script's transaction; or acts only once that
				       transaction committed (PUBLISH: ps_defer) */
	CMD_PUBSUB = 1u << 19,      /* "pubsub" */
	CMD_MAY_REPLICATE = 1u << 20, /* "may_replicate" */
	CMD_SUBCTX = 1u << 21,      /* a RESP2 client with subscriptions may send it:
				       (P|S)(UN)SUBSCRIBE, PING, QUIT, RESET */
	CMD_TXNBLOCK = 1u << 22,    /* runs a block of commands as one transaction (EXEC,
				       a script): its slow log entry names protocol and
				       retries (server/slowlog.c) */
	CMD_BLOCKING = 1u << 23,    /* "blocking": may block the client in Redis
				       (BLPOP, ...; rckv parks it by polling: dispatch.c) */
};

struct cmd_def {
	const char *name;       /* lower case, as COMMAND reports it; a subcommand
				   row has its full name, "client|setname" */
	cmd_handler fn;
	int arity;
	uint32_t flags;
	int first_key, last_key, key_step; /* Redis's legacy key spec; 0 0 0: none */
	const char *group;      /* COMMAND DOCS group: string, generic, connection, server, transactions */
	const char *since;      /* Redis version the command appeared in */
	const char *summary;
	const char *complexity;
	const struct cmd_def *subcommands; /* NULL-name-terminated, or NULL */
	const char *acl_categories;        /* e.g. "@write @string @slow" */
	/* COMMAND INFO extras, space-separated, NULL for none: */
	const char *key_flags;  /* flags of the key spec, e.g. "RW access update" */
	/* When set, a second key spec: the keys after first_key (to last_key)
	 * have these flags, and key_flags is the first key's alone (BITOP's
	 * destination, then its sources). */
	const char *rest_key_flags;
	const char *key_notes;  /* the key spec's "notes", or NULL (BITFIELD) */
	/* For a key spec with variable_flags: the flags of the first key in
	 * this request, as Redis's getkeys function gives them (BITFIELD of
	 * GETs only: "RO access"). */
	const char *(*var_key_flags)(int argc, const struct resp_arg *argv);
	const char *tips;       /* e.g. "request_policy:multi_shard response_policy:agg_sum" */
	/* Set for a read-only command whose reply, with exactly one argument
	 * (its key), depends only on what that key holds (GET, STRLEN, TYPE,
	 * EXISTS): dispatch answers it with reply1(c, false, ...) when the key
	 * is absent (cc_key_absent), without running a transaction. */
	cmd_reply1 reply1;
	/* Keys whose positions depend on the arguments (EVAL's numkeys): used
	 * in place of first_key..last_key when set. */
	int (*getkeys)(int argc, const struct resp_arg *argv, int *idx, int max);
};

/* Look a command up by name (case-insensitive, not NUL-terminated). */
const struct cmd_def *cmd_lookup(const char *name, size_t len);
/* Dense ids of every row, subcommand rows included, 0..cmd_id_count()-1
 * (for per-command statistics); cmd_id of a row not in the table is -1. */
int cmd_id(const struct cmd_def *d);
int cmd_id_count(void);
const struct cmd_def *cmd_by_id(int id);
/* Look a subcommand up in a container's table. */
const struct cmd_def *cmd_lookup_sub(const struct cmd_def *parent, const char *name, size_t len);
/* The whole table, for COMMAND / COMMAND COUNT / COMMAND DOCS. */
const struct cmd_def *cmd_table(int *count);
/* Flag names for COMMAND INFO ("write", "readonly", "fast", ...). */
int cmd_flag_names(uint32_t flags, const char **names, int max);

/* Keys of a request per its def (for COMMAND GETKEYS); returns count, fills idx[]. */
int cmd_get_keys(const struct cmd_def *d, int argc, const struct resp_arg *argv, int *idx,
		 int max);
/*
 * cmd_reserved_key - does the request name a key that starts with the
 * reserved prefix of collection parts (placement.h PL_PART_PREFIX)?
 * Dispatch and scripts refuse such a request with CMD_RESERVED_KEY_ERR,
 * so a client's key can never be taken for a part, nor reach one.
 */
bool cmd_reserved_key(const struct cmd_def *d, int argc, const struct resp_arg *argv);
#define CMD_RESERVED_KEY_ERR \
	"ERR key names that start with the bytes \\xff rckv \\x00 are reserved for rckv's " \
	"collection parts"
/* The key spec flags of the key at argv[pos], a key position of d in the
 * request argv[0..argc): its key_flags (or what var_key_flags says for
 * this request), or rest_key_flags past the first key. May be NULL. */
const char *cmd_key_flags(const struct cmd_def *d, int argc, const struct resp_arg *argv,
			  int pos);

/* Reply helpers used by many handlers (exact Redis texts). */
void cmd_reply_wrong_args(struct cmd_ctx *c);        /* ERR wrong number of arguments for '%s' command */
void cmd_reply_syntax(struct cmd_ctx *c);            /* ERR syntax error */
void cmd_reply_not_int(struct cmd_ctx *c);           /* ERR value is not an integer or out of range */
void cmd_reply_txn_error(struct cmd_ctx *c, int rc); /* OOM / too big / fabric, for a txn_* error */
/* After a txn_* call failed: cut the command's partial reply back to `mark`;
 * CC_ABORT is returned for the handler to pass up, an error is replied. */
int cmd_txn_failed(struct cmd_ctx *c, size_t mark, int rc);
/* Count a keyspace hit or miss in the worker's stats. */
void cmd_count_lookup(struct cmd_ctx *c, bool found);
/* The handler of a command with a reply1: read key 1 (its type into
 * c->ktype), then reply1. */
int cmd_read_key1(struct cmd_ctx *c, cmd_reply1 reply1);
/* In a reply1: the key was found holding another type than `want`
 * (enum txn_type): WRONGTYPE replied, true. */
bool cmd_reply_wrongtype(struct cmd_ctx *c, bool found, uint8_t want);
/*
 * cmd_get_string - txn_get for a command that works on a string value
 * (GET, INCR, APPEND, SETRANGE, the bit commands, ...): COLL_EWRONGTYPE
 * (cmd_txn_failed replies Redis's WRONGTYPE error) when the key holds a
 * hash, a set, or any other type.
 */
int cmd_get_string(struct cmd_ctx *c, const char *key, size_t klen, const char **v, size_t *vl,
		   bool *found);

/* Handler prototypes, grouped by file. */
#define CMD(n) int n(struct cmd_ctx *c)
/* cmd_string.c */
CMD(cmd_get); CMD(cmd_set); CMD(cmd_setnx); CMD(cmd_getset); CMD(cmd_getdel);
CMD(cmd_mget); CMD(cmd_mset); CMD(cmd_msetnx); CMD(cmd_incr); CMD(cmd_incrby);
CMD(cmd_decr); CMD(cmd_decrby); CMD(cmd_incrbyfloat); CMD(cmd_append); CMD(cmd_strlen);
CMD(cmd_getrange); CMD(cmd_setrange);
void cmd_get_reply(struct cmd_ctx *c, bool found, const char *v, size_t vlen);
void cmd_strlen_reply(struct cmd_ctx *c, bool found, const char *v, size_t vlen);
/* SET's key flags for this request: it reads the key only with GET. */
const char *cmd_set_key_flags(int argc, const struct resp_arg *argv);
/* cmd_bits.c */
CMD(cmd_setbit); CMD(cmd_getbit); CMD(cmd_bitcount); CMD(cmd_bitpos); CMD(cmd_bitop);
CMD(cmd_bitfield); CMD(cmd_bitfield_ro); CMD(cmd_lcs);
void cmd_bitcount_reply(struct cmd_ctx *c, bool found, const char *v, size_t vlen);
const char *cmd_bitfield_key_flags(int argc, const struct resp_arg *argv);
/* cmd_hash.c */
CMD(cmd_hset); CMD(cmd_hsetnx); CMD(cmd_hmset); CMD(cmd_hget); CMD(cmd_hmget); CMD(cmd_hdel);
CMD(cmd_hlen); CMD(cmd_hstrlen); CMD(cmd_hexists); CMD(cmd_hkeys); CMD(cmd_hvals);
CMD(cmd_hgetall); CMD(cmd_hincrby); CMD(cmd_hincrbyfloat); CMD(cmd_hrandfield); CMD(cmd_hscan);
/* HSCAN's and SSCAN's step over a collection of `type` (vals: its
 * elements have values). */
int cmd_coll_scan(struct cmd_ctx *c, uint8_t type, bool vals);
/* Random bits for a command (HRANDFIELD, SPOP, ...): a seed, then draws. */
uint64_t cmd_rnd_seed(struct cmd_ctx *c);
uint64_t cmd_rnd_next(uint64_t *s);
/* cmd_set.c */
CMD(cmd_sadd); CMD(cmd_srem); CMD(cmd_scard); CMD(cmd_sismember); CMD(cmd_smismember);
CMD(cmd_smembers); CMD(cmd_spop); CMD(cmd_srandmember); CMD(cmd_smove); CMD(cmd_sinter);
CMD(cmd_sunion); CMD(cmd_sdiff); CMD(cmd_sinterstore); CMD(cmd_sunionstore);
CMD(cmd_sdiffstore); CMD(cmd_sintercard); CMD(cmd_sscan);
int cmd_sintercard_keys(int argc, const struct resp_arg *argv, int *idx, int max);
/* cmd_list.c */
CMD(cmd_lpush); CMD(cmd_rpush); CMD(cmd_lpushx); CMD(cmd_rpushx); CMD(cmd_lpop); CMD(cmd_rpop);
CMD(cmd_llen); CMD(cmd_lrange); CMD(cmd_lindex); CMD(cmd_lset); CMD(cmd_linsert);
CMD(cmd_lrem); CMD(cmd_ltrim); CMD(cmd_lpos); CMD(cmd_lmove); CMD(cmd_rpoplpush);
CMD(cmd_lmpop); CMD(cmd_blpop); CMD(cmd_brpop); CMD(cmd_blmove); CMD(cmd_brpoplpush);
CMD(cmd_blmpop);
int cmd_lmpop_keys(int argc, const struct resp_arg *argv, int *idx, int max);
int cmd_blmpop_keys(int argc, const struct resp_arg *argv, int *idx, int max);
/* cmd_zset.c, cmd_zsetop.c */
CMD(cmd_zadd); CMD(cmd_zincrby); CMD(cmd_zrem); CMD(cmd_zcard); CMD(cmd_zscore);
CMD(cmd_zmscore); CMD(cmd_zrank); CMD(cmd_zrevrank); CMD(cmd_zcount); CMD(cmd_zlexcount);
CMD(cmd_zrange); CMD(cmd_zrevrange); CMD(cmd_zrangebyscore); CMD(cmd_zrevrangebyscore);
CMD(cmd_zrangebylex); CMD(cmd_zrevrangebylex); CMD(cmd_zrangestore);
CMD(cmd_zremrangebyrank); CMD(cmd_zremrangebyscore); CMD(cmd_zremrangebylex);
CMD(cmd_zpopmin); CMD(cmd_zpopmax); CMD(cmd_bzpopmin); CMD(cmd_bzpopmax); CMD(cmd_zmpop);
CMD(cmd_bzmpop); CMD(cmd_zrandmember); CMD(cmd_zscan); CMD(cmd_zunion); CMD(cmd_zinter);
CMD(cmd_zdiff); CMD(cmd_zunionstore); CMD(cmd_zinterstore); CMD(cmd_zdiffstore);
CMD(cmd_zintercard);
/* numkeys-style key positions: ZMPOP, BZMPOP, ZUNION/ZINTER/ZDIFF/ZINTERCARD,
 * the STORE forms (destination first). */
int cmd_zmpop_keys(int argc, const struct resp_arg *argv, int *idx, int max);
int cmd_bzmpop_keys(int argc, const struct resp_arg *argv, int *idx, int max);
int cmd_zunion_keys(int argc, const struct resp_arg *argv, int *idx, int max);
int cmd_zunionstore_keys(int argc, const struct resp_arg *argv, int *idx, int max);
/* cmd_keys.c */
void cmd_exists_reply(struct cmd_ctx *c, bool found, const char *v, size_t vlen);
void cmd_type_reply(struct cmd_ctx *c, bool found, const char *v, size_t vlen);
/* TYPE's name of an enum txn_type: "string", "hash", ... */
const char *cmd_type_name(uint8_t type);
CMD(cmd_del); CMD(cmd_exists); CMD(cmd_type); CMD(cmd_keys); CMD(cmd_scan);
CMD(cmd_dbsize); CMD(cmd_flushdb); CMD(cmd_flushall);
/* cmd_keyspace.c */
CMD(cmd_rename); CMD(cmd_renamenx); CMD(cmd_copy); CMD(cmd_move); CMD(cmd_randomkey);
CMD(cmd_dump); CMD(cmd_restore); CMD(cmd_object); CMD(cmd_debug_object);
CMD(cmd_debug_digest_value);
CMD(cmd_memory);
/* save.c */
CMD(cmd_save); CMD(cmd_bgsave); CMD(cmd_lastsave);
/* cmd_expire.c */
CMD(cmd_expire); CMD(cmd_pexpire); CMD(cmd_expireat); CMD(cmd_pexpireat); CMD(cmd_ttl);
CMD(cmd_pttl); CMD(cmd_expiretime); CMD(cmd_pexpiretime); CMD(cmd_persist); CMD(cmd_getex);
CMD(cmd_setex); CMD(cmd_psetex);
/* cmd_conn.c */
CMD(cmd_ping); CMD(cmd_echo); CMD(cmd_hello); CMD(cmd_auth); CMD(cmd_quit); CMD(cmd_reset);
CMD(cmd_select); CMD(cmd_client);
/* cmd_server.c */
CMD(cmd_command); CMD(cmd_config); CMD(cmd_info); CMD(cmd_time); CMD(cmd_shutdown);
CMD(cmd_function); CMD(cmd_debug); CMD(cmd_role); CMD(cmd_wait);
/* cmd_rckv.c */
CMD(cmd_rckv);
/* acl.c */
CMD(cmd_acl);
/* script.c */
CMD(cmd_eval); CMD(cmd_evalsha); CMD(cmd_eval_ro); CMD(cmd_evalsha_ro);
CMD(cmd_script);
/* slowlog.c, monitor.c */
CMD(cmd_slowlog); CMD(cmd_monitor); CMD(cmd_latency);
/* cmd_pubsub.c */
CMD(cmd_subscribe); CMD(cmd_unsubscribe); CMD(cmd_psubscribe); CMD(cmd_punsubscribe);
CMD(cmd_ssubscribe); CMD(cmd_sunsubscribe); CMD(cmd_publish); CMD(cmd_spublish);
CMD(cmd_pubsub);
/* multi.c */
CMD(cmd_multi); CMD(cmd_exec); CMD(cmd_discard); CMD(cmd_watch); CMD(cmd_unwatch);
#undef CMD

#endif
