/*
 * cmdtable.c: the command table (command.h), its lookup, and the reply
 * helpers every handler shares.
 *
 * Each row carries what Redis 7.0 reports for the command in COMMAND INFO
 * and COMMAND DOCS (arity, flags, legacy key positions, ACL categories, key
 * spec flags, tips, group, since, summary, complexity), checked against a
 * real redis-server 7.0.15. rckv's own policy flags (CMD_NOTXN,
 * CMD_MULTICTL, CMD_ALLKEYS) ride along and are never reported.
 *
 * Containers (CLIENT, COMMAND, CONFIG, FUNCTION) list only the subcommands
 * rckv implements, so that dispatch answers Redis's "unknown subcommand"
 * error for the others. A subcommand row has its full name
 * ("client|setname") and the container's handler, which switches on
 * argv[1] again. DEBUG has no subcommand table, as in Redis: cmd_debug
 * parses its own arguments and replies Redis's DEBUG errors.
 *
 * Lookup: every request looks its command up, so cmd_lookup hashes the
 * name (ASCII case folded) into a fixed open-addressing index built once,
 * before main runs, from the const rows: one hash and usually one
 * comparison per request.
 */
#include <ctype.h>
#include <ck_pr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cc/txn.h"
#include "placement/placement.h"
#include "server/coll.h"
#include "server/command.h"
#include "server/memory.h"
#include "server/node.h"
#include "server/script.h"
#include "server/worker.h"

/* Flag sets shared by many rows. */
#define F_CONN (CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NOTXN)
#define F_PRELOGIN (CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_FAST | CMD_NOAUTH | \
		    CMD_ALLOW_BUSY | CMD_NOTXN)
#define F_TXCTL (CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NOTXN)
#define F_SUBADMIN (CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NOTXN)

static const struct cmd_def client_subs[] = {
	{ .name = "client|id", .fn = cmd_client, .arity = 2, .flags = F_CONN,
	  .group = "connection", .since = "5.0.0",
	  .summary = "Returns the client ID for the current connection", .complexity = "O(1)",
	  .acl_categories = "@slow @connection" },
	{ .name = "client|setname", .fn = cmd_client, .arity = 3, .flags = F_CONN,
	  .group = "connection", .since = "2.6.9", .summary = "Set the current connection name",
	  .complexity = "O(1)", .acl_categories = "@slow @connection" },
	{ .name = "client|getname", .fn = cmd_client, .arity = 2, .flags = F_CONN,
	  .group = "connection", .since = "2.6.9", .summary = "Get the current connection name",
	  .complexity = "O(1)", .acl_categories = "@slow @connection" },
	{ .name = "client|list", .fn = cmd_client, .arity = -2, .flags = F_SUBADMIN,
	  .group = "connection", .since = "2.4.0",
	  .summary = "Get the list of client connections",
	  .complexity = "O(N) where N is the number of client connections",
	  .acl_categories = "@admin @slow @dangerous @connection",
	  .tips = "nondeterministic_output" },
	{ .name = "client|info", .fn = cmd_client, .arity = 2, .flags = F_CONN,
	  .group = "connection", .since = "6.2.0",
	  .summary = "Returns information about the current client connection.",
	  .complexity = "O(1)", .acl_categories = "@slow @connection",
	  .tips = "nondeterministic_output" },
	/* Redis 7.2's; clients that know 7.0 never send it, and newer ones
	 * ignore its failure, but answering it costs nothing. */
	{ .name = "client|setinfo", .fn = cmd_client, .arity = 4, .flags = F_CONN,
	  .group = "connection", .since = "7.2.0",
	  .summary = "Sets information specific to the client or connection.",
	  .complexity = "O(1)", .acl_categories = "@slow @connection" },
	{ .name = "client|kill", .fn = cmd_client, .arity = -3, .flags = F_SUBADMIN,
	  .group = "connection", .since = "2.4.0", .summary = "Kill the connection of a client",
	  .complexity = "O(N) where N is the number of client connections",
	  .acl_categories = "@admin @slow @dangerous @connection" },
	{ .name = "client|pause", .fn = cmd_client, .arity = -3, .flags = F_SUBADMIN,
	  .group = "connection", .since = "2.9.50",
	  .summary = "Stop processing commands from clients for some time", .complexity = "O(1)",
	  .acl_categories = "@admin @slow @dangerous @connection" },
	{ .name = "client|unpause", .fn = cmd_client, .arity = 2, .flags = F_SUBADMIN,
	  .group = "connection", .since = "6.2.0",
	  .summary = "Resume processing of clients that were paused",
	  .complexity = "O(N) Where N is the number of paused clients",
	  .acl_categories = "@admin @slow @dangerous @connection" },
	{ .name = "client|reply", .fn = cmd_client, .arity = 3, .flags = F_CONN,
	  .group = "connection", .since = "3.2.0",
	  .summary = "Instruct the server whether to reply to commands", .complexity = "O(1)",
	  .acl_categories = "@slow @connection" },
	{ .name = "client|tracking", .fn = cmd_client, .arity = -3, .flags = F_CONN,
	  .group = "connection", .since = "6.0.0",
	  .summary = "Enable or disable server assisted client side caching support",
	  .complexity = "O(1). Some options may introduce additional complexity.",
	  .acl_categories = "@slow @connection" },
	{ .name = "client|no-evict", .fn = cmd_client, .arity = 3, .flags = F_SUBADMIN,
	  .group = "connection", .since = "7.0.0",
	  .summary = "Set client eviction mode for the current connection",
	  .complexity = "O(1)", .acl_categories = "@admin @slow @dangerous @connection" },
	{ .name = "client|help", .fn = cmd_client, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "connection", .since = "5.0.0",
	  .summary = "Show helpful text about the different subcommands", .complexity = "O(1)",
	  .acl_categories = "@slow @connection" },
	{ .name = NULL },
};

#define F_CMDSUB (CMD_LOADING | CMD_STALE | CMD_NOTXN)
static const struct cmd_def command_subs[] = {
	{ .name = "command|count", .fn = cmd_command, .arity = 2, .flags = F_CMDSUB,
	  .group = "server", .since = "2.8.13", .summary = "Get total number of Redis commands",
	  .complexity = "O(1)", .acl_categories = "@slow @connection" },
	{ .name = "command|docs", .fn = cmd_command, .arity = -2, .flags = F_CMDSUB,
	  .group = "server", .since = "7.0.0",
	  .summary = "Get array of specific Redis command documentation",
	  .complexity = "O(N) where N is the number of commands to look up",
	  .acl_categories = "@slow @connection", .tips = "nondeterministic_output_order" },
	{ .name = "command|info", .fn = cmd_command, .arity = -2, .flags = F_CMDSUB,
	  .group = "server", .since = "2.8.13",
	  .summary = "Get array of specific Redis command details, or all when no argument is "
		     "given.",
	  .complexity = "O(N) where N is the number of commands to look up",
	  .acl_categories = "@slow @connection", .tips = "nondeterministic_output_order" },
	{ .name = "command|list", .fn = cmd_command, .arity = -2, .flags = F_CMDSUB,
	  .group = "server", .since = "7.0.0", .summary = "Get an array of Redis command names",
	  .complexity = "O(N) where N is the total number of Redis commands",
	  .acl_categories = "@slow @connection", .tips = "nondeterministic_output_order" },
	{ .name = "command|getkeys", .fn = cmd_command, .arity = -4, .flags = F_CMDSUB,
	  .group = "server", .since = "2.8.13", .summary = "Extract keys given a full Redis command",
	  .complexity = "O(N) where N is the number of arguments to the command",
	  .acl_categories = "@slow @connection" },
	{ .name = "command|getkeysandflags", .fn = cmd_command, .arity = -4, .flags = F_CMDSUB,
	  .group = "server", .since = "7.0.0",
	  .summary = "Extract keys and access flags given a full Redis command",
	  .complexity = "O(N) where N is the number of arguments to the command",
	  .acl_categories = "@slow @connection" },
	{ .name = "command|help", .fn = cmd_command, .arity = 2, .flags = F_CMDSUB,
	  .group = "server", .since = "5.0.0",
	  .summary = "Show helpful text about the different subcommands", .complexity = "O(1)",
	  .acl_categories = "@slow @connection" },
	{ .name = NULL },
};

static const struct cmd_def config_subs[] = {
	{ .name = "config|get", .fn = cmd_config, .arity = -3, .flags = F_SUBADMIN,
	  .group = "server", .since = "2.0.0",
	  .summary = "Get the values of configuration parameters",
	  .complexity = "O(N) when N is the number of configuration parameters provided",
	  .acl_categories = "@admin @slow @dangerous" },
	{ .name = "config|set", .fn = cmd_config, .arity = -4, .flags = F_SUBADMIN,
	  .group = "server", .since = "2.0.0",
	  .summary = "Set configuration parameters to the given values",
	  .complexity = "O(N) when N is the number of configuration parameters provided",
	  .acl_categories = "@admin @slow @dangerous",
	  .tips = "request_policy:all_nodes response_policy:all_succeeded" },
	{ .name = "config|rewrite", .fn = cmd_config, .arity = 2, .flags = F_SUBADMIN,
	  .group = "server", .since = "2.8.0",
	  .summary = "Overwrite the configuration file with the in-memory configuration",
	  .complexity = "O(1)", .acl_categories = "@admin @slow @dangerous",
	  .tips = "request_policy:all_nodes response_policy:all_succeeded" },
	{ .name = "config|resetstat", .fn = cmd_config, .arity = 2, .flags = F_SUBADMIN,
	  .group = "server", .since = "2.0.0", .summary = "Reset the stats returned by INFO",
	  .complexity = "O(1)", .acl_categories = "@admin @slow @dangerous" },
	{ .name = "config|help", .fn = cmd_config, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "server", .since = "5.0.0",
	  .summary = "Show helpful text about the different subcommands", .complexity = "O(1)",
	  .acl_categories = "@slow" },
	{ .name = NULL },
};

static const struct cmd_def function_subs[] = {
	{ .name = "function|flush", .fn = cmd_function, .arity = -2,
	  .flags = CMD_WRITE | CMD_NOSCRIPT | CMD_NOTXN, .group = "scripting", .since = "7.0.0",
	  .summary = "Deleting all functions",
	  .complexity = "O(N) where N is the number of functions deleted",
	  .acl_categories = "@write @slow @scripting",
	  .tips = "request_policy:all_shards response_policy:all_succeeded" },
	{ .name = "function|help", .fn = cmd_function, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "scripting", .since = "7.0.0",
	  .summary = "Show helpful text about the different subcommands", .complexity = "O(1)",
	  .acl_categories = "@slow @scripting" },
	{ .name = NULL },
};

/* EVAL and its kind: transactional commands (no CMD_NOTXN), whose keys
 * script_getkeys finds. */
#define F_EVAL (CMD_NOSCRIPT | CMD_STALE | CMD_SKIP_MONITOR | CMD_NO_MANDATORY_KEYS | \
		CMD_MOVABLEKEYS | CMD_TXNBLOCK)

static const struct cmd_def script_subs[] = {
	{ .name = "script|load", .fn = cmd_script, .arity = 3,
	  .flags = CMD_NOSCRIPT | CMD_STALE | CMD_NOTXN, .group = "scripting", .since = "2.6.0",
	  .summary = "Load the specified Lua script into the script cache.",
	  .complexity = "O(N) with N being the length in bytes of the script body.",
	  .acl_categories = "@slow @scripting",
	  .tips = "request_policy:all_nodes response_policy:all_succeeded" },
	{ .name = "script|exists", .fn = cmd_script, .arity = -3,
	  .flags = CMD_NOSCRIPT | CMD_NOTXN, .group = "scripting", .since = "2.6.0",
	  .summary = "Check existence of scripts in the script cache.",
	  .complexity = "O(N) with N being the number of scripts to check (so checking a "
			"single script is an O(1) operation).",
	  .acl_categories = "@slow @scripting",
	  .tips = "request_policy:all_shards response_policy:agg_logical_and" },
	{ .name = "script|flush", .fn = cmd_script, .arity = -2,
	  .flags = CMD_NOSCRIPT | CMD_NOTXN, .group = "scripting", .since = "2.6.0",
	  .summary = "Remove all the scripts from the script cache.",
	  .complexity = "O(N) with N being the number of scripts in cache",
	  .acl_categories = "@slow @scripting",
	  .tips = "request_policy:all_nodes response_policy:all_succeeded" },
	{ .name = "script|kill", .fn = cmd_script, .arity = 2,
	  .flags = CMD_NOSCRIPT | CMD_ALLOW_BUSY | CMD_NOTXN, .group = "scripting",
	  .since = "2.6.0", .summary = "Kill the script currently in execution.",
	  .complexity = "O(1)", .acl_categories = "@slow @scripting",
	  .tips = "request_policy:all_shards response_policy:one_succeeded" },
	{ .name = "script|help", .fn = cmd_script, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "scripting", .since = "5.0.0",
	  .summary = "Show helpful text about the different subcommands", .complexity = "O(1)",
	  .acl_categories = "@slow @scripting" },
	{ .name = "script|debug", .fn = cmd_script, .arity = 3,
	  .flags = CMD_NOSCRIPT | CMD_NOTXN, .group = "scripting", .since = "3.2.0",
	  .summary = "Set the debug mode for executed scripts.", .complexity = "O(1)",
	  .acl_categories = "@slow @scripting" },
	{ .name = NULL },
};

/* One key at argv[1]. */
#define KEY1 .first_key = 1, .last_key = 1, .key_step = 1

static const struct cmd_def rckv_subs[] = {
	{ .name = "rckv|nodes", .fn = cmd_rckv, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "cluster", .since = "rckv",
	  .summary = "The nodes of the cluster and the slot ranges each owns",
	  .complexity = "O(N) where N is the number of nodes", .acl_categories = "@slow" },
	{ .name = "rckv|keyslot", .fn = cmd_rckv, .arity = 3,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "cluster", .since = "rckv",
	  .summary = "The hash slot of a key", .complexity = "O(N) where N is the key length",
	  .acl_categories = "@slow" },
	{ .name = "rckv|keynode", .fn = cmd_rckv, .arity = 3,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "cluster", .since = "rckv",
	  .summary = "The id of the node that owns a key", .complexity = "O(N) where N is the key length",
	  .acl_categories = "@slow" },
	{ .name = "rckv|slots", .fn = cmd_rckv, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "cluster", .since = "rckv",
	  .summary = "The slot ranges and the replica set of each, primary first",
	  .complexity = "O(N) where N is the number of slots", .acl_categories = "@slow" },
	{ .name = "rckv|copies", .fn = cmd_rckv, .arity = 3,
	  .flags = CMD_STALE | CMD_NOTXN, .group = "cluster", .since = "rckv",
	  .summary = "A key's copy on each node of its replica set (a diagnostic)",
	  .complexity = "O(R) where R is the number of replicas", .acl_categories = "@read @slow" },
	{ .name = "rckv|locks", .fn = cmd_rckv, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "cluster", .since = "rckv",
	  .summary = "The lock words held in this node's MemStore (a diagnostic)",
	  .complexity = "O(N) where N is the number of index slots", .acl_categories = "@slow" },
	{ .name = "rckv|rebalance", .fn = cmd_rckv, .arity = 2,
	  .flags = CMD_ADMIN | CMD_NOTXN, .group = "cluster", .since = "rckv",
	  .summary = "Move the primaries back to their nodes once rejoined nodes have copied their slots",
	  .complexity = "O(1) here; the move is a configuration change", .acl_categories = "@admin @slow" },
	{ .name = "rckv|help", .fn = cmd_rckv, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "cluster", .since = "rckv",
	  .summary = "Show helpful text about the different subcommands", .complexity = "O(1)",
	  .acl_categories = "@slow" },
	{ .name = NULL },
};

/* OBJECT's subcommands read their key, argument 2, in a transaction of
 * their own (cmd_object: a subcommand row is CMD_NOTXN, as every
 * container's), or in the caller's: MULTI's, a script's
 * (CMD_SCRIPT_NOTXN); HELP reads none. */
#define KEY2 .first_key = 2, .last_key = 2, .key_step = 1
#define F_OBJKEY (CMD_READONLY | CMD_NOTXN | CMD_SCRIPT_NOTXN)
static const struct cmd_def object_subs[] = {
	{ .name = "object|encoding", .fn = cmd_object, .arity = 3, .flags = F_OBJKEY, KEY2,
	  .group = "generic", .since = "2.2.3",
	  .summary = "Inspect the internal encoding of a Redis object", .complexity = "O(1)",
	  .acl_categories = "@keyspace @read @slow", .key_flags = "RO",
	  .tips = "nondeterministic_output" },
	{ .name = "object|refcount", .fn = cmd_object, .arity = 3, .flags = F_OBJKEY, KEY2,
	  .group = "generic", .since = "2.2.3",
	  .summary = "Get the number of references to the value of the key", .complexity = "O(1)",
	  .acl_categories = "@keyspace @read @slow", .key_flags = "RO",
	  .tips = "nondeterministic_output" },
	{ .name = "object|freq", .fn = cmd_object, .arity = 3, .flags = F_OBJKEY, KEY2,
	  .group = "generic", .since = "4.0.0",
	  .summary = "Get the logarithmic access frequency counter of a Redis object",
	  .complexity = "O(1)", .acl_categories = "@keyspace @read @slow", .key_flags = "RO",
	  .tips = "nondeterministic_output" },
	{ .name = "object|help", .fn = cmd_object, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN | CMD_SCRIPT_NOTXN, .group = "generic",
	  .since = "6.2.0",
	  .summary = "Show helpful text about the different subcommands", .complexity = "O(1)",
	  .acl_categories = "@keyspace @slow" },
	{ .name = "object|idletime", .fn = cmd_object, .arity = 3, .flags = F_OBJKEY, KEY2,
	  .group = "generic", .since = "2.2.3",
	  .summary = "Get the time since a Redis object was last accessed", .complexity = "O(1)",
	  .acl_categories = "@keyspace @read @slow", .key_flags = "RO",
	  .tips = "nondeterministic_output" },
	{ .name = NULL },
};

#define F_PSUB (CMD_PUBSUB | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NOTXN | CMD_SUBCTX)
#define F_PSINFO (CMD_PUBSUB | CMD_LOADING | CMD_STALE | CMD_NOTXN)
static const struct cmd_def pubsub_subs[] = {
	{ .name = "pubsub|channels", .fn = cmd_pubsub, .arity = -2, .flags = F_PSINFO,
	  .group = "pubsub", .since = "2.8.0", .summary = "List active channels",
	  .complexity = "O(N) where N is the number of active channels, and assuming constant "
			"time pattern matching (relatively short channels and patterns)",
	  .acl_categories = "@pubsub @slow" },
	{ .name = "pubsub|numsub", .fn = cmd_pubsub, .arity = -2, .flags = F_PSINFO,
	  .group = "pubsub", .since = "2.8.0", .summary = "Get the count of subscribers for channels",
	  .complexity = "O(N) for the NUMSUB subcommand, where N is the number of requested "
			"channels",
	  .acl_categories = "@pubsub @slow" },
	{ .name = "pubsub|numpat", .fn = cmd_pubsub, .arity = 2, .flags = F_PSINFO,
	  .group = "pubsub", .since = "2.8.0", .summary = "Get the count of unique patterns pattern "
							  "subscriptions",
	  .complexity = "O(1)", .acl_categories = "@pubsub @slow" },
	{ .name = "pubsub|shardchannels", .fn = cmd_pubsub, .arity = -2, .flags = F_PSINFO,
	  .group = "pubsub", .since = "7.0.0", .summary = "List active shard channels",
	  .complexity = "O(N) where N is the number of active shard channels, and assuming "
			"constant time pattern matching (relatively short shard channels).",
	  .acl_categories = "@pubsub @slow" },
	{ .name = "pubsub|shardnumsub", .fn = cmd_pubsub, .arity = -2, .flags = F_PSINFO,
	  .group = "pubsub", .since = "7.0.0",
	  .summary = "Get the count of subscribers for shard channels",
	  .complexity = "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested "
			"shard channels",
	  .acl_categories = "@pubsub @slow" },
	{ .name = "pubsub|help", .fn = cmd_pubsub, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "pubsub", .since = "6.2.0",
	  .summary = "Show helpful text about the different subcommands", .complexity = "O(1)",
	  .acl_categories = "@slow" },
	{ .name = NULL },
};

#define F_LATENCY (CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NOTXN)
static const struct cmd_def latency_subs[] = {
	{ .name = "latency|latest", .fn = cmd_latency, .arity = 2, .flags = F_LATENCY,
	  .group = "server", .since = "2.8.13",
	  .summary = "Return the latest latency samples for all events.", .complexity = "O(1)",
	  .acl_categories = "@admin @slow @dangerous",
	  .tips = "nondeterministic_output request_policy:all_nodes response_policy:special" },
	{ .name = "latency|history", .fn = cmd_latency, .arity = 3, .flags = F_LATENCY,
	  .group = "server", .since = "2.8.13",
	  .summary = "Return timestamp-latency samples for the event.", .complexity = "O(1)",
	  .acl_categories = "@admin @slow @dangerous",
	  .tips = "nondeterministic_output request_policy:all_nodes response_policy:special" },
	{ .name = "latency|reset", .fn = cmd_latency, .arity = -2, .flags = F_LATENCY,
	  .group = "server", .since = "2.8.13",
	  .summary = "Reset latency data for one or more events.", .complexity = "O(1)",
	  .acl_categories = "@admin @slow @dangerous",
	  .tips = "request_policy:all_nodes response_policy:all_succeeded" },
	{ .name = "latency|doctor", .fn = cmd_latency, .arity = 2, .flags = F_LATENCY,
	  .group = "server", .since = "2.8.13",
	  .summary = "Return a human readable latency analysis report.", .complexity = "O(1)",
	  .acl_categories = "@admin @slow @dangerous",
	  .tips = "nondeterministic_output request_policy:all_nodes response_policy:special" },
	{ .name = "latency|histogram", .fn = cmd_latency, .arity = -2, .flags = F_LATENCY,
	  .group = "server", .since = "7.0.0",
	  .summary = "Return the cumulative distribution of latencies of a subset of commands or "
		     "all.",
	  .complexity = "O(N) where N is the number of commands with latency information being "
			"retrieved.",
	  .acl_categories = "@admin @slow @dangerous",
	  .tips = "nondeterministic_output request_policy:all_nodes response_policy:special" },
	{ .name = "latency|help", .fn = cmd_latency, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "server", .since = "2.8.13",
	  .summary = "Show helpful text about the different subcommands.", .complexity = "O(1)",
	  .acl_categories = "@slow" },
	{ .name = NULL },
};

#define F_SLOWLOG (CMD_ADMIN | CMD_LOADING | CMD_STALE | CMD_NOTXN)
static const struct cmd_def slowlog_subs[] = {
	{ .name = "slowlog|get", .fn = cmd_slowlog, .arity = -2, .flags = F_SLOWLOG,
	  .group = "server", .since = "2.2.12", .summary = "Get the slow log's entries",
	  .complexity = "O(N) where N is the number of entries returned",
	  .acl_categories = "@admin @slow @dangerous",
	  .tips = "request_policy:all_nodes nondeterministic_output" },
	{ .name = "slowlog|len", .fn = cmd_slowlog, .arity = 2, .flags = F_SLOWLOG,
	  .group = "server", .since = "2.2.12", .summary = "Get the slow log's length",
	  .complexity = "O(1)", .acl_categories = "@admin @slow @dangerous",
	  .tips = "request_policy:all_nodes response_policy:agg_sum nondeterministic_output" },
	{ .name = "slowlog|reset", .fn = cmd_slowlog, .arity = 2, .flags = F_SLOWLOG,
	  .group = "server", .since = "2.2.12", .summary = "Clear all entries from the slow log",
	  .complexity = "O(N) where N is the number of entries in the slowlog",
	  .acl_categories = "@admin @slow @dangerous",
	  .tips = "request_policy:all_nodes response_policy:all_succeeded" },
	{ .name = "slowlog|help", .fn = cmd_slowlog, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "server", .since = "6.2.0",
	  .summary = "Show helpful text about the different subcommands", .complexity = "O(1)",
	  .acl_categories = "@slow" },
	{ .name = NULL },
};

#define F_MEMSUB CMD_NOTXN
static const struct cmd_def memory_subs[] = {
	{ .name = "memory|usage", .fn = cmd_memory, .arity = -3, .flags = F_OBJKEY, KEY2,
	  .group = "server", .since = "4.0.0", .summary = "Estimate the memory usage of a key",
	  .complexity = "O(N) where N is the number of samples.",
	  .acl_categories = "@read @slow", .key_flags = "RO" },
	{ .name = "memory|doctor", .fn = cmd_memory, .arity = 2, .flags = F_MEMSUB,
	  .group = "server", .since = "4.0.0", .summary = "Outputs memory problems report",
	  .complexity = "O(1)", .acl_categories = "@slow",
	  .tips = "nondeterministic_output request_policy:all_shards response_policy:special" },
	{ .name = "memory|malloc-stats", .fn = cmd_memory, .arity = 2, .flags = F_MEMSUB,
	  .group = "server", .since = "4.0.0", .summary = "Show allocator internal stats",
	  .complexity = "Depends on how much memory is allocated, could be slow",
	  .acl_categories = "@slow",
	  .tips = "nondeterministic_output request_policy:all_shards response_policy:special" },
	{ .name = "memory|stats", .fn = cmd_memory, .arity = 2, .flags = F_MEMSUB,
	  .group = "server", .since = "4.0.0", .summary = "Show memory usage details",
	  .complexity = "O(1)", .acl_categories = "@slow",
	  .tips = "nondeterministic_output request_policy:all_shards response_policy:special" },
	{ .name = "memory|purge", .fn = cmd_memory, .arity = 2, .flags = F_MEMSUB,
	  .group = "server", .since = "4.0.0", .summary = "Ask the allocator to release memory",
	  .complexity = "Depends on how much memory is allocated, could be slow",
	  .acl_categories = "@slow",
	  .tips = "request_policy:all_shards response_policy:all_succeeded" },
	{ .name = "memory|help", .fn = cmd_memory, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "server", .since = "4.0.0",
	  .summary = "Show helpful text about the different subcommands", .complexity = "O(1)",
	  .acl_categories = "@slow" },
	{ .name = NULL },
};

/* ACL (server/acl.c): rows as Redis 7.0.15's COMMAND INFO gives them. */
static const struct cmd_def acl_subs[] = {
	{ .name = "acl|setuser", .fn = cmd_acl, .arity = -3, .flags = F_SUBADMIN,
	  .group = "server", .since = "6.0.0",
	  .summary = "Modify or create the rules for a specific ACL user",
	  .complexity = "O(N). Where N is the number of rules provided.", .acl_categories = "@admin @slow @dangerous" },
	{ .name = "acl|getuser", .fn = cmd_acl, .arity = 3, .flags = F_SUBADMIN,
	  .group = "server", .since = "6.0.0",
	  .summary = "Get the rules for a specific ACL user",
	  .complexity = "O(N). Where N is the number of password, command and pattern rules that the user has.", .acl_categories = "@admin @slow @dangerous" },
	{ .name = "acl|deluser", .fn = cmd_acl, .arity = -3, .flags = F_SUBADMIN,
	  .group = "server", .since = "6.0.0",
	  .summary = "Remove the specified ACL users and the associated rules",
	  .complexity = "O(1) amortized time considering the typical user.", .acl_categories = "@admin @slow @dangerous" },
	{ .name = "acl|list", .fn = cmd_acl, .arity = 2, .flags = F_SUBADMIN,
	  .group = "server", .since = "6.0.0",
	  .summary = "List the current ACL rules in ACL config file format",
	  .complexity = "O(N). Where N is the number of configured users.", .acl_categories = "@admin @slow @dangerous" },
	{ .name = "acl|users", .fn = cmd_acl, .arity = 2, .flags = F_SUBADMIN,
	  .group = "server", .since = "6.0.0",
	  .summary = "List the username of all the configured ACL rules",
	  .complexity = "O(N). Where N is the number of configured users.", .acl_categories = "@admin @slow @dangerous" },
	{ .name = "acl|whoami", .fn = cmd_acl, .arity = 2, .flags = F_CONN,
	  .group = "server", .since = "6.0.0",
	  .summary = "Return the name of the user associated to the current connection",
	  .complexity = "O(1)", .acl_categories = "@slow" },
	{ .name = "acl|cat", .fn = cmd_acl, .arity = -2, .flags = F_CONN,
	  .group = "server", .since = "6.0.0",
	  .summary = "List the ACL categories or the commands inside a category",
	  .complexity = "O(1) since the categories and commands are a fixed set.", .acl_categories = "@slow" },
	{ .name = "acl|dryrun", .fn = cmd_acl, .arity = -4, .flags = F_SUBADMIN,
	  .group = "server", .since = "7.0.0",
	  .summary = "Returns whether the user can execute the given command without executing the command.",
	  .complexity = "O(1).", .acl_categories = "@admin @slow @dangerous" },
	{ .name = "acl|log", .fn = cmd_acl, .arity = -2, .flags = F_SUBADMIN,
	  .group = "server", .since = "6.0.0",
	  .summary = "List latest events denied because of ACLs in place",
	  .complexity = "O(N) with N being the number of entries shown.", .acl_categories = "@admin @slow @dangerous" },
	{ .name = "acl|genpass", .fn = cmd_acl, .arity = -2, .flags = F_CONN,
	  .group = "server", .since = "6.0.0",
	  .summary = "Generate a pseudorandom secure password to use for ACL users",
	  .complexity = "O(1)", .acl_categories = "@slow" },
	{ .name = "acl|save", .fn = cmd_acl, .arity = 2, .flags = F_SUBADMIN,
	  .group = "server", .since = "6.0.0",
	  .summary = "Save the current ACL rules in the configured ACL file",
	  .complexity = "O(N). Where N is the number of configured users.", .acl_categories = "@admin @slow @dangerous" },
	{ .name = "acl|load", .fn = cmd_acl, .arity = 2, .flags = F_SUBADMIN,
	  .group = "server", .since = "6.0.0",
	  .summary = "Reload the ACLs from the configured ACL file",
	  .complexity = "O(N). Where N is the number of configured users.", .acl_categories = "@admin @slow @dangerous" },
	{ .name = "acl|help", .fn = cmd_acl, .arity = 2, .flags = (CMD_LOADING | CMD_STALE | CMD_NOTXN),
	  .group = "server", .since = "6.0.0",
	  .summary = "Show helpful text about the different subcommands",
	  .complexity = "O(1)", .acl_categories = "@slow" },
	{ .name = NULL },
};

static const struct cmd_def table[] = {
	/* ---- string ---- */
	{ .name = "get", .fn = cmd_get, .arity = 2, .flags = CMD_READONLY | CMD_FAST, KEY1,
	  .group = "string", .since = "1.0.0", .summary = "Get the value of a key",
	  .complexity = "O(1)", .acl_categories = "@read @string @fast",
	  .key_flags = "RO access", .reply1 = cmd_get_reply },
	{ .name = "set", .fn = cmd_set, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM, KEY1,
	  .group = "string", .since = "1.0.0", .summary = "Set the string value of a key",
	  .complexity = "O(1)", .acl_categories = "@write @string @slow",
	  .key_flags = "RW access update variable_flags",
	  .key_notes = "RW and ACCESS due to the optional `GET` argument",
	  .var_key_flags = cmd_set_key_flags },
	{ .name = "setnx", .fn = cmd_setnx, .arity = 3,
	  .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST, KEY1, .group = "string", .since = "1.0.0",
	  .summary = "Set the value of a key, only if the key does not exist",
	  .complexity = "O(1)", .acl_categories = "@write @string @fast",
	  .key_flags = "OW insert" },
	{ .name = "getset", .fn = cmd_getset, .arity = 3,
	  .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST, KEY1, .group = "string", .since = "1.0.0",
	  .summary = "Set the string value of a key and return its old value",
	  .complexity = "O(1)", .acl_categories = "@write @string @fast",
	  .key_flags = "RW access update" },
	{ .name = "getdel", .fn = cmd_getdel, .arity = 2, .flags = CMD_WRITE | CMD_FAST, KEY1,
	  .group = "string", .since = "6.2.0", .summary = "Get the value of a key and delete the key",
	  .complexity = "O(1)", .acl_categories = "@write @string @fast",
	  .key_flags = "RW access delete" },
	{ .name = "mget", .fn = cmd_mget, .arity = -2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = -1, .key_step = 1, .group = "string", .since = "1.0.0",
	  .summary = "Get the values of all the given keys",
	  .complexity = "O(N) where N is the number of keys to retrieve.",
	  .acl_categories = "@read @string @fast", .key_flags = "RO access",
	  .tips = "request_policy:multi_shard" },
	{ .name = "mset", .fn = cmd_mset, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = -1, .key_step = 2, .group = "string", .since = "1.0.1",
	  .summary = "Set multiple keys to multiple values",
	  .complexity = "O(N) where N is the number of keys to set.",
	  .acl_categories = "@write @string @slow", .key_flags = "OW update",
	  .tips = "request_policy:multi_shard response_policy:all_succeeded" },
	{ .name = "msetnx", .fn = cmd_msetnx, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = -1, .key_step = 2, .group = "string", .since = "1.0.1",
	  .summary = "Set multiple keys to multiple values, only if none of the keys exist",
	  .complexity = "O(N) where N is the number of keys to set.",
	  .acl_categories = "@write @string @slow", .key_flags = "OW insert",
	  .tips = "request_policy:multi_shard response_policy:agg_min" },
	{ .name = "incr", .fn = cmd_incr, .arity = 2, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  KEY1, .group = "string", .since = "1.0.0",
	  .summary = "Increment the integer value of a key by one", .complexity = "O(1)",
	  .acl_categories = "@write @string @fast", .key_flags = "RW access update" },
	{ .name = "incrby", .fn = cmd_incrby, .arity = 3,
	  .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST, KEY1, .group = "string", .since = "1.0.0",
	  .summary = "Increment the integer value of a key by the given amount",
	  .complexity = "O(1)", .acl_categories = "@write @string @fast",
	  .key_flags = "RW access update" },
	{ .name = "decr", .fn = cmd_decr, .arity = 2, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  KEY1, .group = "string", .since = "1.0.0",
	  .summary = "Decrement the integer value of a key by one", .complexity = "O(1)",
	  .acl_categories = "@write @string @fast", .key_flags = "RW access update" },
	{ .name = "decrby", .fn = cmd_decrby, .arity = 3,
	  .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST, KEY1, .group = "string", .since = "1.0.0",
	  .summary = "Decrement the integer value of a key by the given number",
	  .complexity = "O(1)", .acl_categories = "@write @string @fast",
	  .key_flags = "RW access update" },
	{ .name = "incrbyfloat", .fn = cmd_incrbyfloat, .arity = 3,
	  .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST, KEY1, .group = "string", .since = "2.6.0",
	  .summary = "Increment the float value of a key by the given amount",
	  .complexity = "O(1)", .acl_categories = "@write @string @fast",
	  .key_flags = "RW access update" },
	{ .name = "append", .fn = cmd_append, .arity = 3,
	  .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST, KEY1, .group = "string", .since = "2.0.0",
	  .summary = "Append a value to a key",
	  .complexity = "O(1). The amortized time complexity is O(1) assuming the appended value "
			"is small and the already present value is of any size, since the "
			"dynamic string library used by Redis will double the free space "
			"available on every reallocation.",
	  .acl_categories = "@write @string @fast", .key_flags = "RW insert" },
	{ .name = "strlen", .fn = cmd_strlen, .arity = 2, .flags = CMD_READONLY | CMD_FAST, KEY1,
	  .group = "string", .since = "2.2.0",
	  .summary = "Get the length of the value stored in a key", .complexity = "O(1)",
	  .acl_categories = "@read @string @fast", .key_flags = "RO", .reply1 = cmd_strlen_reply },
	{ .name = "getrange", .fn = cmd_getrange, .arity = 4, .flags = CMD_READONLY, KEY1,
	  .group = "string", .since = "2.4.0",
	  .summary = "Get a substring of the string stored at a key",
	  .complexity = "O(N) where N is the length of the returned string. The complexity is "
			"ultimately determined by the returned length, but because creating a "
			"substring from an existing string is very cheap, it can be considered "
			"O(1) for small strings.",
	  .acl_categories = "@read @string @slow", .key_flags = "RO access" },
	{ .name = "setrange", .fn = cmd_setrange, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM,
	  KEY1, .group = "string", .since = "2.2.0",
	  .summary = "Overwrite part of a string at key starting at the specified offset",
	  .complexity = "O(1), not counting the time taken to copy the new string in place. "
			"Usually, this string is very small so the amortized complexity is O(1). "
			"Otherwise, complexity is O(M) with M being the length of the value "
			"argument.",
	  .acl_categories = "@write @string @slow", .key_flags = "RW update" },

	{ .name = "lcs", .fn = cmd_lcs, .arity = -3, .flags = CMD_READONLY, .first_key = 1,
	  .last_key = 2, .key_step = 1, .group = "string", .since = "7.0.0",
	  .summary = "Find longest common substring",
	  .complexity = "O(N*M) where N and M are the lengths of s1 and s2, respectively",
	  .acl_categories = "@read @string @slow", .key_flags = "RO access" },

	/* ---- bitmap (cmd_bits.c) ---- */
	{ .name = "setbit", .fn = cmd_setbit, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM, KEY1,
	  .group = "bitmap", .since = "2.2.0",
	  .summary = "Sets or clears the bit at offset in the string value stored at key",
	  .complexity = "O(1)", .acl_categories = "@write @bitmap @slow",
	  .key_flags = "RW access update" },
	{ .name = "getbit", .fn = cmd_getbit, .arity = 3, .flags = CMD_READONLY | CMD_FAST, KEY1,
	  .group = "bitmap", .since = "2.2.0",
	  .summary = "Returns the bit value at offset in the string value stored at key",
	  .complexity = "O(1)", .acl_categories = "@read @bitmap @fast", .key_flags = "RO access" },
	{ .name = "bitcount", .fn = cmd_bitcount, .arity = -2, .flags = CMD_READONLY, KEY1,
	  .group = "bitmap", .since = "2.6.0", .summary = "Count set bits in a string",
	  .complexity = "O(N)", .acl_categories = "@read @bitmap @slow", .key_flags = "RO access",
	  .reply1 = cmd_bitcount_reply },
	{ .name = "bitpos", .fn = cmd_bitpos, .arity = -3, .flags = CMD_READONLY, KEY1,
	  .group = "bitmap", .since = "2.8.7", .summary = "Find first bit set or clear in a string",
	  .complexity = "O(N)", .acl_categories = "@read @bitmap @slow", .key_flags = "RO access" },
	/* The destination is written blind, the sources are read. */
	{ .name = "bitop", .fn = cmd_bitop, .arity = -4, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 2, .last_key = -1, .key_step = 1, .group = "bitmap", .since = "2.6.0",
	  .summary = "Perform bitwise operations between strings", .complexity = "O(N)",
	  .acl_categories = "@write @bitmap @slow", .key_flags = "OW update",
	  .rest_key_flags = "RO access" },
	{ .name = "bitfield", .fn = cmd_bitfield, .arity = -2, .flags = CMD_WRITE | CMD_DENYOOM,
	  KEY1, .group = "bitmap", .since = "3.2.0",
	  .summary = "Perform arbitrary bitfield integer operations on strings",
	  .complexity = "O(1) for each subcommand specified",
	  .acl_categories = "@write @bitmap @slow",
	  .key_notes = "This command allows both access and modification of the key",
	  .key_flags = "RW access update variable_flags",
	  .var_key_flags = cmd_bitfield_key_flags },
	{ .name = "bitfield_ro", .fn = cmd_bitfield_ro, .arity = -2,
	  .flags = CMD_READONLY | CMD_FAST, KEY1, .group = "bitmap", .since = "6.0.0",
	  .summary = "Perform arbitrary bitfield integer operations on strings. Read-only variant "
		     "of BITFIELD",
	  .complexity = "O(1) for each subcommand specified",
	  .acl_categories = "@read @bitmap @fast", .key_flags = "RO access" },

	/* ---- generic ---- */
	{ .name = "del", .fn = cmd_del, .arity = -2, .flags = CMD_WRITE, .first_key = 1,
	  .last_key = -1, .key_step = 1, .group = "generic", .since = "1.0.0",
	  .summary = "Delete a key",
	  .complexity = "O(N) where N is the number of keys that will be removed. When a key to "
			"remove holds a value other than a string, the individual complexity for "
			"this key is O(M) where M is the number of elements in the list, set, "
			"sorted set or hash. Removing a single key that holds a string value is "
			"O(1).",
	  .acl_categories = "@keyspace @write @slow", .key_flags = "RM delete",
	  .tips = "request_policy:multi_shard response_policy:agg_sum" },
	{ .name = "unlink", .fn = cmd_del, .arity = -2, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = -1, .key_step = 1, .group = "generic", .since = "4.0.0",
	  .summary = "Delete a key asynchronously in another thread. Otherwise it is just as DEL, "
		     "but non blocking.",
	  .complexity = "O(1) for each key removed regardless of its size. Then the command does "
			"O(N) work in a different thread in order to reclaim memory, where N is "
			"the number of allocations the deleted objects where composed of.",
	  .acl_categories = "@keyspace @write @fast", .key_flags = "RM delete",
	  .tips = "request_policy:multi_shard response_policy:agg_sum" },
	{ .name = "exists", .fn = cmd_exists, .arity = -2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = -1, .key_step = 1, .group = "generic", .since = "1.0.0",
	  .summary = "Determine if a key exists",
	  .complexity = "O(N) where N is the number of keys to check.",
	  .acl_categories = "@keyspace @read @fast", .key_flags = "RO",
	  .tips = "request_policy:multi_shard response_policy:agg_sum",
	  .reply1 = cmd_exists_reply },
	{ .name = "type", .fn = cmd_type, .arity = 2, .flags = CMD_READONLY | CMD_FAST, KEY1,
	  .group = "generic", .since = "1.0.0", .summary = "Determine the type stored at key",
	  .complexity = "O(1)", .acl_categories = "@keyspace @read @fast", .key_flags = "RO",
	  .reply1 = cmd_type_reply },
	{ .name = "expire", .fn = cmd_expire, .arity = -3, .flags = CMD_WRITE | CMD_FAST, KEY1,
	  .group = "generic", .since = "1.0.0",
	  .summary = "Set a key's time to live in seconds", .complexity = "O(1)",
	  .acl_categories = "@keyspace @write @fast", .key_flags = "RW update" },
	{ .name = "pexpire", .fn = cmd_pexpire, .arity = -3, .flags = CMD_WRITE | CMD_FAST, KEY1,
	  .group = "generic", .since = "2.6.0",
	  .summary = "Set a key's time to live in milliseconds", .complexity = "O(1)",
	  .acl_categories = "@keyspace @write @fast", .key_flags = "RW update" },
	{ .name = "expireat", .fn = cmd_expireat, .arity = -3, .flags = CMD_WRITE | CMD_FAST, KEY1,
	  .group = "generic", .since = "1.2.0",
	  .summary = "Set the expiration for a key as a UNIX timestamp", .complexity = "O(1)",
	  .acl_categories = "@keyspace @write @fast", .key_flags = "RW update" },
	{ .name = "pexpireat", .fn = cmd_pexpireat, .arity = -3, .flags = CMD_WRITE | CMD_FAST, KEY1,
	  .group = "generic", .since = "2.6.0",
	  .summary = "Set the expiration for a key as a UNIX timestamp specified in milliseconds", .complexity = "O(1)",
	  .acl_categories = "@keyspace @write @fast", .key_flags = "RW update" },
	{ .name = "ttl", .fn = cmd_ttl, .arity = 2, .flags = CMD_READONLY | CMD_FAST, KEY1,
	  .group = "generic", .since = "1.0.0",
	  .summary = "Get the time to live for a key in seconds", .complexity = "O(1)",
	  .acl_categories = "@keyspace @read @fast", .key_flags = "RO access" },
	{ .name = "pttl", .fn = cmd_pttl, .arity = 2, .flags = CMD_READONLY | CMD_FAST, KEY1,
	  .group = "generic", .since = "2.6.0",
	  .summary = "Get the time to live for a key in milliseconds", .complexity = "O(1)",
	  .acl_categories = "@keyspace @read @fast", .key_flags = "RO access" },
	{ .name = "expiretime", .fn = cmd_expiretime, .arity = 2, .flags = CMD_READONLY | CMD_FAST, KEY1,
	  .group = "generic", .since = "7.0.0",
	  .summary = "Get the expiration Unix timestamp for a key", .complexity = "O(1)",
	  .acl_categories = "@keyspace @read @fast", .key_flags = "RO access" },
	{ .name = "pexpiretime", .fn = cmd_pexpiretime, .arity = 2, .flags = CMD_READONLY | CMD_FAST, KEY1,
	  .group = "generic", .since = "7.0.0",
	  .summary = "Get the expiration Unix timestamp for a key in milliseconds", .complexity = "O(1)",
	  .acl_categories = "@keyspace @read @fast", .key_flags = "RO access" },
	{ .name = "persist", .fn = cmd_persist, .arity = 2, .flags = CMD_WRITE | CMD_FAST, KEY1,
	  .group = "generic", .since = "2.2.0", .summary = "Remove the expiration from a key",
	  .complexity = "O(1)", .acl_categories = "@keyspace @write @fast",
	  .key_flags = "RW update" },
	{ .name = "getex", .fn = cmd_getex, .arity = -2, .flags = CMD_WRITE | CMD_FAST, KEY1,
	  .group = "string", .since = "6.2.0",
	  .summary = "Get the value of a key and optionally set its expiration",
	  .complexity = "O(1)", .acl_categories = "@write @string @fast",
	  .key_flags = "RW access update" },
	{ .name = "setex", .fn = cmd_setex, .arity = 4,
	  .flags = CMD_WRITE | CMD_DENYOOM, KEY1, .group = "string", .since = "2.0.0",
	  .summary = "Set the value and expiration of a key", .complexity = "O(1)",
	  .acl_categories = "@write @string @slow", .key_flags = "OW update" },
	{ .name = "psetex", .fn = cmd_psetex, .arity = 4,
	  .flags = CMD_WRITE | CMD_DENYOOM, KEY1, .group = "string", .since = "2.6.0",
	  .summary = "Set the value and expiration in milliseconds of a key", .complexity = "O(1)",
	  .acl_categories = "@write @string @slow", .key_flags = "OW update" },
	{ .name = "keys", .fn = cmd_keys, .arity = 2,
	  .flags = CMD_READONLY | CMD_NOTXN | CMD_ALLKEYS, .group = "generic", .since = "1.0.0",
	  .summary = "Find all keys matching the given pattern",
	  .complexity = "O(N) with N being the number of keys in the database, under the "
			"assumption that the key names in the database and the given pattern "
			"have limited length.",
	  .acl_categories = "@keyspace @read @slow @dangerous",
	  .tips = "request_policy:all_shards nondeterministic_output_order" },
	{ .name = "scan", .fn = cmd_scan, .arity = -2,
	  .flags = CMD_READONLY | CMD_NOTXN | CMD_ALLKEYS, .group = "generic", .since = "2.8.0",
	  .summary = "Incrementally iterate the keys space",
	  .complexity = "O(1) for every call. O(N) for a complete iteration, including enough "
			"command calls for the cursor to return back to 0. N is the number of "
			"elements inside the collection.",
	  .acl_categories = "@keyspace @read @slow",
	  .tips = "nondeterministic_output request_policy:special" },
	{ .name = "dbsize", .fn = cmd_dbsize, .arity = 1,
	  .flags = CMD_READONLY | CMD_FAST | CMD_NOTXN | CMD_ALLKEYS, .group = "server",
	  .since = "1.0.0", .summary = "Return the number of keys in the selected database",
	  .complexity = "O(1)", .acl_categories = "@keyspace @read @fast",
	  .tips = "request_policy:all_shards response_policy:agg_sum" },
	{ .name = "flushdb", .fn = cmd_flushdb, .arity = -1,
	  .flags = CMD_WRITE | CMD_NOTXN | CMD_ALLKEYS, .group = "server", .since = "1.0.0",
	  .summary = "Remove all keys from the current database",
	  .complexity = "O(N) where N is the number of keys in the selected database",
	  .acl_categories = "@keyspace @write @slow @dangerous",
	  .tips = "request_policy:all_shards response_policy:all_succeeded" },
	{ .name = "flushall", .fn = cmd_flushall, .arity = -1,
	  .flags = CMD_WRITE | CMD_NOTXN | CMD_ALLKEYS, .group = "server", .since = "1.0.0",
	  .summary = "Remove all keys from all databases",
	  .complexity = "O(N) where N is the total number of keys in all databases",
	  .acl_categories = "@keyspace @write @slow @dangerous",
	  .tips = "request_policy:all_shards response_policy:all_succeeded" },

	/* ---- hash (cmd_hash.c) ---- */
	{ .name = "hset", .fn = cmd_hset, .arity = -4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Set the string value of a hash field",
	  .complexity = "O(1) for each field/value pair added, so O(N) to add N field/value "
	                "pairs when the command is called with multiple field/value pairs.",
	  .acl_categories = "@write @hash @fast", .key_flags = "RW update" },
	{ .name = "hsetnx", .fn = cmd_hsetnx, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Set the value of a hash field, only if the field does not exist",
	  .complexity = "O(1)",
	  .acl_categories = "@write @hash @fast", .key_flags = "RW insert" },
	{ .name = "hmset", .fn = cmd_hmset, .arity = -4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Set multiple hash fields to multiple values",
	  .complexity = "O(N) where N is the number of fields being set.",
	  .acl_categories = "@write @hash @fast", .key_flags = "RW update" },
	{ .name = "hget", .fn = cmd_hget, .arity = 3, .flags = CMD_READONLY | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Get the value of a hash field",
	  .complexity = "O(1)",
	  .acl_categories = "@read @hash @fast", .key_flags = "RO access" },
	{ .name = "hmget", .fn = cmd_hmget, .arity = -3, .flags = CMD_READONLY | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Get the values of all the given hash fields",
	  .complexity = "O(N) where N is the number of fields being requested.",
	  .acl_categories = "@read @hash @fast", .key_flags = "RO access" },
	{ .name = "hdel", .fn = cmd_hdel, .arity = -3, .flags = CMD_WRITE | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Delete one or more hash fields",
	  .complexity = "O(N) where N is the number of fields to be removed.",
	  .acl_categories = "@write @hash @fast", .key_flags = "RW delete" },
	{ .name = "hlen", .fn = cmd_hlen, .arity = 2, .flags = CMD_READONLY | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Get the number of fields in a hash",
	  .complexity = "O(1)",
	  .acl_categories = "@read @hash @fast", .key_flags = "RO" },
	{ .name = "hstrlen", .fn = cmd_hstrlen, .arity = 3, .flags = CMD_READONLY | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "3.2.0",
	  .summary = "Get the length of the value of a hash field",
	  .complexity = "O(1)",
	  .acl_categories = "@read @hash @fast", .key_flags = "RO" },
	{ .name = "hexists", .fn = cmd_hexists, .arity = 3, .flags = CMD_READONLY | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Determine if a hash field exists",
	  .complexity = "O(1)",
	  .acl_categories = "@read @hash @fast", .key_flags = "RO" },
	{ .name = "hkeys", .fn = cmd_hkeys, .arity = 2, .flags = CMD_READONLY,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Get all the fields in a hash",
	  .complexity = "O(N) where N is the size of the hash.",
	  .acl_categories = "@read @hash @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output_order" },
	{ .name = "hvals", .fn = cmd_hvals, .arity = 2, .flags = CMD_READONLY,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Get all the values in a hash",
	  .complexity = "O(N) where N is the size of the hash.",
	  .acl_categories = "@read @hash @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output_order" },
	{ .name = "hgetall", .fn = cmd_hgetall, .arity = 2, .flags = CMD_READONLY,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Get all the fields and values in a hash",
	  .complexity = "O(N) where N is the size of the hash.",
	  .acl_categories = "@read @hash @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output_order" },
	{ .name = "hincrby", .fn = cmd_hincrby, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "2.0.0",
	  .summary = "Increment the integer value of a hash field by the given number",
	  .complexity = "O(1)",
	  .acl_categories = "@write @hash @fast", .key_flags = "RW access update" },
	{ .name = "hincrbyfloat", .fn = cmd_hincrbyfloat, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  KEY1,
	  .group = "hash", .since = "2.6.0",
	  .summary = "Increment the float value of a hash field by the given amount",
	  .complexity = "O(1)",
	  .acl_categories = "@write @hash @fast", .key_flags = "RW access update" },
	{ .name = "hrandfield", .fn = cmd_hrandfield, .arity = -2, .flags = CMD_READONLY,
	  KEY1,
	  .group = "hash", .since = "6.2.0",
	  .summary = "Get one or multiple random fields from a hash",
	  .complexity = "O(N) where N is the number of fields returned",
	  .acl_categories = "@read @hash @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output" },
	{ .name = "hscan", .fn = cmd_hscan, .arity = -3, .flags = CMD_READONLY,
	  KEY1,
	  .group = "hash", .since = "2.8.0",
	  .summary = "Incrementally iterate hash fields and associated values",
	  .complexity = "O(1) for every call. O(N) for a complete iteration, including enough "
	                "command calls for the cursor to return back to 0. N is the number of "
	                "elements inside the collection..",
	  .acl_categories = "@read @hash @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output" },

	/* ---- set (cmd_set.c) ---- */
	{ .name = "sadd", .fn = cmd_sadd, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  KEY1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Add one or more members to a set",
	  .complexity = "O(1) for each element added, so O(N) to add N elements when the "
	                "command is called with multiple arguments.",
	  .acl_categories = "@write @set @fast", .key_flags = "RW insert" },
	{ .name = "srem", .fn = cmd_srem, .arity = -3, .flags = CMD_WRITE | CMD_FAST,
	  KEY1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Remove one or more members from a set",
	  .complexity = "O(N) where N is the number of members to be removed.",
	  .acl_categories = "@write @set @fast", .key_flags = "RW delete" },
	{ .name = "scard", .fn = cmd_scard, .arity = 2, .flags = CMD_READONLY | CMD_FAST,
	  KEY1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Get the number of members in a set",
	  .complexity = "O(1)",
	  .acl_categories = "@read @set @fast", .key_flags = "RO" },
	{ .name = "sismember", .fn = cmd_sismember, .arity = 3, .flags = CMD_READONLY | CMD_FAST,
	  KEY1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Determine if a given value is a member of a set",
	  .complexity = "O(1)",
	  .acl_categories = "@read @set @fast", .key_flags = "RO" },
	{ .name = "smismember", .fn = cmd_smismember, .arity = -3, .flags = CMD_READONLY | CMD_FAST,
	  KEY1,
	  .group = "set", .since = "6.2.0",
	  .summary = "Returns the membership associated with the given elements for a set",
	  .complexity = "O(N) where N is the number of elements being checked for membership",
	  .acl_categories = "@read @set @fast", .key_flags = "RO access" },
	{ .name = "smembers", .fn = cmd_smembers, .arity = 2, .flags = CMD_READONLY,
	  KEY1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Get all the members in a set",
	  .complexity = "O(N) where N is the set cardinality.",
	  .acl_categories = "@read @set @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output_order" },
	{ .name = "spop", .fn = cmd_spop, .arity = -2, .flags = CMD_WRITE | CMD_FAST,
	  KEY1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Remove and return one or multiple random members from a set",
	  .complexity = "Without the count argument O(1), otherwise O(N) where N is the value "
	                "of the passed count.",
	  .acl_categories = "@write @set @fast", .key_flags = "RW access delete",
	  .tips = "nondeterministic_output" },
	{ .name = "srandmember", .fn = cmd_srandmember, .arity = -2, .flags = CMD_READONLY,
	  KEY1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Get one or multiple random members from a set",
	  .complexity = "Without the count argument O(1), otherwise O(N) where N is the "
	                "absolute value of the passed count.",
	  .acl_categories = "@read @set @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output" },
	{ .name = "smove", .fn = cmd_smove, .arity = 4, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 2, .key_step = 1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Move a member from one set to another",
	  .complexity = "O(1)",
	  .acl_categories = "@write @set @fast", .key_flags = "RW access delete",
	  .rest_key_flags = "RW insert" },
	{ .name = "sinter", .fn = cmd_sinter, .arity = -2, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = -1, .key_step = 1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Intersect multiple sets",
	  .complexity = "O(N*M) worst case where N is the cardinality of the smallest set and M "
	                "is the number of sets.",
	  .acl_categories = "@read @set @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output_order" },
	{ .name = "sunion", .fn = cmd_sunion, .arity = -2, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = -1, .key_step = 1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Add multiple sets",
	  .complexity = "O(N) where N is the total number of elements in all given sets.",
	  .acl_categories = "@read @set @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output_order" },
	{ .name = "sdiff", .fn = cmd_sdiff, .arity = -2, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = -1, .key_step = 1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Subtract multiple sets",
	  .complexity = "O(N) where N is the total number of elements in all given sets.",
	  .acl_categories = "@read @set @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output_order" },
	{ .name = "sinterstore", .fn = cmd_sinterstore, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = -1, .key_step = 1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Intersect multiple sets and store the resulting set in a key",
	  .complexity = "O(N*M) worst case where N is the cardinality of the smallest set and M "
	                "is the number of sets.",
	  .acl_categories = "@write @set @slow", .key_flags = "RW update",
	  .rest_key_flags = "RO access" },
	{ .name = "sunionstore", .fn = cmd_sunionstore, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = -1, .key_step = 1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Add multiple sets and store the resulting set in a key",
	  .complexity = "O(N) where N is the total number of elements in all given sets.",
	  .acl_categories = "@write @set @slow", .key_flags = "OW update",
	  .rest_key_flags = "RO access" },
	{ .name = "sdiffstore", .fn = cmd_sdiffstore, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = -1, .key_step = 1,
	  .group = "set", .since = "1.0.0",
	  .summary = "Subtract multiple sets and store the resulting set in a key",
	  .complexity = "O(N) where N is the total number of elements in all given sets.",
	  .acl_categories = "@write @set @slow", .key_flags = "OW update",
	  .rest_key_flags = "RO access" },
	{ .name = "sintercard", .fn = cmd_sintercard, .arity = -3, .flags = CMD_READONLY | CMD_MOVABLEKEYS,
	  .getkeys = cmd_sintercard_keys,
	  .group = "set", .since = "7.0.0",
	  .summary = "Intersect multiple sets and return the cardinality of the result",
	  .complexity = "O(N*M) worst case where N is the cardinality of the smallest set and M "
	                "is the number of sets.",
	  .acl_categories = "@read @set @slow", .key_flags = "RO access" },
	{ .name = "sscan", .fn = cmd_sscan, .arity = -3, .flags = CMD_READONLY,
	  KEY1,
	  .group = "set", .since = "2.8.0",
	  .summary = "Incrementally iterate Set elements",
	  .complexity = "O(1) for every call. O(N) for a complete iteration, including enough "
	                "command calls for the cursor to return back to 0. N is the number of "
	                "elements inside the collection..",
	  .acl_categories = "@read @set @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output" },

	/* ---- list (cmd_list.c) ---- */
	{ .name = "lpush", .fn = cmd_lpush, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "1.0.0",
	  .summary = "Prepend one or multiple elements to a list",
	  .complexity = "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
	  .acl_categories = "@write @list @fast", .key_flags = "RW insert" },
	{ .name = "rpush", .fn = cmd_rpush, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "1.0.0",
	  .summary = "Append one or multiple elements to a list",
	  .complexity = "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
	  .acl_categories = "@write @list @fast", .key_flags = "RW insert" },
	{ .name = "lpushx", .fn = cmd_lpushx, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "2.2.0",
	  .summary = "Prepend an element to a list, only if the list exists",
	  .complexity = "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
	  .acl_categories = "@write @list @fast", .key_flags = "RW insert" },
	{ .name = "rpushx", .fn = cmd_rpushx, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "2.2.0",
	  .summary = "Append an element to a list, only if the list exists",
	  .complexity = "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
	  .acl_categories = "@write @list @fast", .key_flags = "RW insert" },
	{ .name = "lpop", .fn = cmd_lpop, .arity = -2, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "1.0.0",
	  .summary = "Remove and get the first elements in a list",
	  .complexity = "O(N) where N is the number of elements returned",
	  .acl_categories = "@write @list @fast", .key_flags = "RW access delete" },
	{ .name = "rpop", .fn = cmd_rpop, .arity = -2, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "1.0.0",
	  .summary = "Remove and get the last elements in a list",
	  .complexity = "O(N) where N is the number of elements returned",
	  .acl_categories = "@write @list @fast", .key_flags = "RW access delete" },
	{ .name = "llen", .fn = cmd_llen, .arity = 2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "1.0.0",
	  .summary = "Get the length of a list",
	  .complexity = "O(1)",
	  .acl_categories = "@read @list @fast", .key_flags = "RO" },
	{ .name = "lrange", .fn = cmd_lrange, .arity = 4, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "1.0.0",
	  .summary = "Get a range of elements from a list",
	  .complexity = "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
	  .acl_categories = "@read @list @slow", .key_flags = "RO access" },
	{ .name = "lindex", .fn = cmd_lindex, .arity = 3, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "1.0.0",
	  .summary = "Get an element from a list by its index",
	  .complexity = "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
	  .acl_categories = "@read @list @slow", .key_flags = "RO access" },
	{ .name = "lset", .fn = cmd_lset, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "1.0.0",
	  .summary = "Set the value of an element in a list by its index",
	  .complexity = "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
	  .acl_categories = "@write @list @slow", .key_flags = "RW update" },
	{ .name = "linsert", .fn = cmd_linsert, .arity = 5, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "2.2.0",
	  .summary = "Insert an element before or after another element in a list",
	  .complexity = "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
	  .acl_categories = "@write @list @slow", .key_flags = "RW insert" },
	{ .name = "lrem", .fn = cmd_lrem, .arity = 4, .flags = CMD_WRITE,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "1.0.0",
	  .summary = "Remove elements from a list",
	  .complexity = "O(N+M) where N is the length of the list and M is the number of elements removed.",
	  .acl_categories = "@write @list @slow", .key_flags = "RW delete" },
	{ .name = "ltrim", .fn = cmd_ltrim, .arity = 4, .flags = CMD_WRITE,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "1.0.0",
	  .summary = "Trim a list to the specified range",
	  .complexity = "O(N) where N is the number of elements to be removed by the operation.",
	  .acl_categories = "@write @list @slow", .key_flags = "RW delete" },
	{ .name = "lpos", .fn = cmd_lpos, .arity = -3, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "list", .since = "6.0.6",
	  .summary = "Return the index of matching elements on a list",
	  .complexity = "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
	  .acl_categories = "@read @list @slow", .key_flags = "RO access" },
	{ .name = "lmove", .fn = cmd_lmove, .arity = 5, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 2, .key_step = 1,
	  .group = "list", .since = "6.2.0",
	  .summary = "Pop an element from a list, push it to another list and return it",
	  .complexity = "O(1)",
	  .acl_categories = "@write @list @slow", .key_flags = "RW access delete",
	  .rest_key_flags = "RW insert" },
	{ .name = "rpoplpush", .fn = cmd_rpoplpush, .arity = 3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 2, .key_step = 1,
	  .group = "list", .since = "1.2.0",
	  .summary = "Remove the last element in a list, prepend it to another list and return it",
	  .complexity = "O(1)",
	  .acl_categories = "@write @list @slow", .key_flags = "RW access delete",
	  .rest_key_flags = "RW insert" },
	{ .name = "lmpop", .fn = cmd_lmpop, .arity = -4, .flags = CMD_WRITE | CMD_MOVABLEKEYS,
	  .getkeys = cmd_lmpop_keys,
	  .group = "list", .since = "7.0.0",
	  .summary = "Pop elements from a list",
	  .complexity = "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
	  .acl_categories = "@write @list @slow", .key_flags = "RW access delete" },
	{ .name = "blpop", .fn = cmd_blpop, .arity = -3, .flags = CMD_WRITE | CMD_NOSCRIPT | CMD_BLOCKING,
	  .first_key = 1, .last_key = -2, .key_step = 1,
	  .group = "list", .since = "2.0.0",
	  .summary = "Remove and get the first element in a list, or block until one is available",
	  .complexity = "O(N) where N is the number of provided keys.",
	  .acl_categories = "@write @list @slow @blocking", .key_flags = "RW access delete" },
	{ .name = "brpop", .fn = cmd_brpop, .arity = -3, .flags = CMD_WRITE | CMD_NOSCRIPT | CMD_BLOCKING,
	  .first_key = 1, .last_key = -2, .key_step = 1,
	  .group = "list", .since = "2.0.0",
	  .summary = "Remove and get the last element in a list, or block until one is available",
	  .complexity = "O(N) where N is the number of provided keys.",
	  .acl_categories = "@write @list @slow @blocking", .key_flags = "RW access delete" },
	{ .name = "blmove", .fn = cmd_blmove, .arity = 6, .flags = CMD_WRITE | CMD_DENYOOM | CMD_NOSCRIPT | CMD_BLOCKING,
	  .first_key = 1, .last_key = 2, .key_step = 1,
	  .group = "list", .since = "6.2.0",
	  .summary = "Pop an element from a list, push it to another list and return it; or block until one is available",
	  .complexity = "O(1)",
	  .acl_categories = "@write @list @slow @blocking", .key_flags = "RW access delete",
	  .rest_key_flags = "RW insert" },
	{ .name = "brpoplpush", .fn = cmd_brpoplpush, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_NOSCRIPT | CMD_BLOCKING,
	  .first_key = 1, .last_key = 2, .key_step = 1,
	  .group = "list", .since = "2.2.0",
	  .summary = "Pop an element from a list, push it to another list and return it; or block until one is available",
	  .complexity = "O(1)",
	  .acl_categories = "@write @list @slow @blocking", .key_flags = "RW access delete",
	  .rest_key_flags = "RW insert" },
	{ .name = "blmpop", .fn = cmd_blmpop, .arity = -5, .flags = CMD_WRITE | CMD_BLOCKING | CMD_MOVABLEKEYS,
	  .getkeys = cmd_blmpop_keys,
	  .group = "list", .since = "7.0.0",
	  .summary = "Pop elements from a list, or block until one is available",
	  .complexity = "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
	  .acl_categories = "@write @list @slow @blocking", .key_flags = "RW access delete" },

	/* ---- sorted set (cmd_zset.c, cmd_zsetop.c) ---- */
	{ .name = "zadd", .fn = cmd_zadd, .arity = -4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "1.2.0",
	  .summary = "Add one or more members to a sorted set, or update its score if it already exists",
	  .complexity = "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
	  .acl_categories = "@write @sortedset @fast", .key_flags = "RW update" },
	{ .name = "zincrby", .fn = cmd_zincrby, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "1.2.0",
	  .summary = "Increment the score of a member in a sorted set",
	  .complexity = "O(log(N)) where N is the number of elements in the sorted set.",
	  .acl_categories = "@write @sortedset @fast", .key_flags = "RW access update" },
	{ .name = "zrem", .fn = cmd_zrem, .arity = -3, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "1.2.0",
	  .summary = "Remove one or more members from a sorted set",
	  .complexity = "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.",
	  .acl_categories = "@write @sortedset @fast", .key_flags = "RW delete" },
	{ .name = "zcard", .fn = cmd_zcard, .arity = 2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "1.2.0",
	  .summary = "Get the number of members in a sorted set",
	  .complexity = "O(1)",
	  .acl_categories = "@read @sortedset @fast", .key_flags = "RO" },
	{ .name = "zscore", .fn = cmd_zscore, .arity = 3, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "1.2.0",
	  .summary = "Get the score associated with the given member in a sorted set",
	  .complexity = "O(1)",
	  .acl_categories = "@read @sortedset @fast", .key_flags = "RO access" },
	{ .name = "zmscore", .fn = cmd_zmscore, .arity = -3, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "6.2.0",
	  .summary = "Get the score associated with the given members in a sorted set",
	  .complexity = "O(N) where N is the number of members being requested.",
	  .acl_categories = "@read @sortedset @fast", .key_flags = "RO access" },
	{ .name = "zrank", .fn = cmd_zrank, .arity = 3, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "2.0.0",
	  .summary = "Determine the index of a member in a sorted set",
	  .complexity = "O(log(N))",
	  .acl_categories = "@read @sortedset @fast", .key_flags = "RO access" },
	{ .name = "zrevrank", .fn = cmd_zrevrank, .arity = 3, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "2.0.0",
	  .summary = "Determine the index of a member in a sorted set, with scores ordered from high to low",
	  .complexity = "O(log(N))",
	  .acl_categories = "@read @sortedset @fast", .key_flags = "RO access" },
	{ .name = "zcount", .fn = cmd_zcount, .arity = 4, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "2.0.0",
	  .summary = "Count the members in a sorted set with scores within the given values",
	  .complexity = "O(log(N)) with N being the number of elements in the sorted set.",
	  .acl_categories = "@read @sortedset @fast", .key_flags = "RO access" },
	{ .name = "zlexcount", .fn = cmd_zlexcount, .arity = 4, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "2.8.9",
	  .summary = "Count the number of members in a sorted set between a given lexicographical range",
	  .complexity = "O(log(N)) with N being the number of elements in the sorted set.",
	  .acl_categories = "@read @sortedset @fast", .key_flags = "RO access" },
	{ .name = "zrange", .fn = cmd_zrange, .arity = -4, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "1.2.0",
	  .summary = "Return a range of members in a sorted set",
	  .complexity = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access" },
	{ .name = "zrangestore", .fn = cmd_zrangestore, .arity = -5, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 2, .key_step = 1,
	  .group = "sorted-set", .since = "6.2.0",
	  .summary = "Store a range of members from sorted set into another key",
	  .complexity = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.",
	  .acl_categories = "@write @sortedset @slow", .key_flags = "OW update",
	  .rest_key_flags = "RO access" },
	{ .name = "zrevrange", .fn = cmd_zrevrange, .arity = -4, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "1.2.0",
	  .summary = "Return a range of members in a sorted set, by index, with scores ordered from high to low",
	  .complexity = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access" },
	{ .name = "zrangebyscore", .fn = cmd_zrangebyscore, .arity = -4, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "1.0.5",
	  .summary = "Return a range of members in a sorted set, by score",
	  .complexity = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access" },
	{ .name = "zrevrangebyscore", .fn = cmd_zrevrangebyscore, .arity = -4, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "2.2.0",
	  .summary = "Return a range of members in a sorted set, by score, with scores ordered from high to low",
	  .complexity = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access" },
	{ .name = "zrangebylex", .fn = cmd_zrangebylex, .arity = -4, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "2.8.9",
	  .summary = "Return a range of members in a sorted set, by lexicographical range",
	  .complexity = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access" },
	{ .name = "zrevrangebylex", .fn = cmd_zrevrangebylex, .arity = -4, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "2.8.9",
	  .summary = "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.",
	  .complexity = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access" },
	{ .name = "zremrangebyrank", .fn = cmd_zremrangebyrank, .arity = 4, .flags = CMD_WRITE,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "2.0.0",
	  .summary = "Remove all members in a sorted set within the given indexes",
	  .complexity = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
	  .acl_categories = "@write @sortedset @slow", .key_flags = "RW delete" },
	{ .name = "zremrangebyscore", .fn = cmd_zremrangebyscore, .arity = 4, .flags = CMD_WRITE,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "1.2.0",
	  .summary = "Remove all members in a sorted set within the given scores",
	  .complexity = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
	  .acl_categories = "@write @sortedset @slow", .key_flags = "RW delete" },
	{ .name = "zremrangebylex", .fn = cmd_zremrangebylex, .arity = 4, .flags = CMD_WRITE,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "2.8.9",
	  .summary = "Remove all members in a sorted set between the given lexicographical range",
	  .complexity = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
	  .acl_categories = "@write @sortedset @slow", .key_flags = "RW delete" },
	{ .name = "zpopmin", .fn = cmd_zpopmin, .arity = -2, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "5.0.0",
	  .summary = "Remove and return members with the lowest scores in a sorted set",
	  .complexity = "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.",
	  .acl_categories = "@write @sortedset @fast", .key_flags = "RW access delete" },
	{ .name = "zpopmax", .fn = cmd_zpopmax, .arity = -2, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "5.0.0",
	  .summary = "Remove and return members with the highest scores in a sorted set",
	  .complexity = "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.",
	  .acl_categories = "@write @sortedset @fast", .key_flags = "RW access delete" },
	{ .name = "bzpopmin", .fn = cmd_bzpopmin, .arity = -3, .flags = CMD_WRITE | CMD_NOSCRIPT | CMD_FAST | CMD_BLOCKING,
	  .first_key = 1, .last_key = -2, .key_step = 1,
	  .group = "sorted-set", .since = "5.0.0",
	  .summary = "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available",
	  .complexity = "O(log(N)) with N being the number of elements in the sorted set.",
	  .acl_categories = "@write @sortedset @fast @blocking", .key_flags = "RW access delete" },
	{ .name = "bzpopmax", .fn = cmd_bzpopmax, .arity = -3, .flags = CMD_WRITE | CMD_NOSCRIPT | CMD_FAST | CMD_BLOCKING,
	  .first_key = 1, .last_key = -2, .key_step = 1,
	  .group = "sorted-set", .since = "5.0.0",
	  .summary = "Remove and return the member with the highest score from one or more sorted sets, or block until one is available",
	  .complexity = "O(log(N)) with N being the number of elements in the sorted set.",
	  .acl_categories = "@write @sortedset @fast @blocking", .key_flags = "RW access delete" },
	{ .name = "zmpop", .fn = cmd_zmpop, .arity = -4, .flags = CMD_WRITE | CMD_MOVABLEKEYS,
	  .first_key = 0, .last_key = 0, .key_step = 0, .getkeys = cmd_zmpop_keys,
	  .group = "sorted-set", .since = "7.0.0",
	  .summary = "Remove and return members with scores in a sorted set",
	  .complexity = "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.",
	  .acl_categories = "@write @sortedset @slow", .key_flags = "RW access delete" },
	{ .name = "bzmpop", .fn = cmd_bzmpop, .arity = -5, .flags = CMD_WRITE | CMD_MOVABLEKEYS | CMD_BLOCKING,
	  .first_key = 0, .last_key = 0, .key_step = 0, .getkeys = cmd_bzmpop_keys,
	  .group = "sorted-set", .since = "7.0.0",
	  .summary = "Remove and return members with scores in a sorted set or block until one is available",
	  .complexity = "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.",
	  .acl_categories = "@write @sortedset @slow @blocking", .key_flags = "RW access delete" },
	{ .name = "zrandmember", .fn = cmd_zrandmember, .arity = -2, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "6.2.0",
	  .summary = "Get one or multiple random elements from a sorted set",
	  .complexity = "O(N) where N is the number of elements returned",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output" },
	{ .name = "zscan", .fn = cmd_zscan, .arity = -3, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .key_step = 1,
	  .group = "sorted-set", .since = "2.8.0",
	  .summary = "Incrementally iterate sorted sets elements and associated scores",
	  .complexity = "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output" },
	{ .name = "zunion", .fn = cmd_zunion, .arity = -3, .flags = CMD_READONLY | CMD_MOVABLEKEYS,
	  .first_key = 0, .last_key = 0, .key_step = 0, .getkeys = cmd_zunion_keys,
	  .group = "sorted-set", .since = "6.2.0",
	  .summary = "Add multiple sorted sets",
	  .complexity = "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access" },
	{ .name = "zinter", .fn = cmd_zinter, .arity = -3, .flags = CMD_READONLY | CMD_MOVABLEKEYS,
	  .first_key = 0, .last_key = 0, .key_step = 0, .getkeys = cmd_zunion_keys,
	  .group = "sorted-set", .since = "6.2.0",
	  .summary = "Intersect multiple sorted sets",
	  .complexity = "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access" },
	{ .name = "zdiff", .fn = cmd_zdiff, .arity = -3, .flags = CMD_READONLY | CMD_MOVABLEKEYS,
	  .first_key = 0, .last_key = 0, .key_step = 0, .getkeys = cmd_zunion_keys,
	  .group = "sorted-set", .since = "6.2.0",
	  .summary = "Subtract multiple sorted sets",
	  .complexity = "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access" },
	{ .name = "zunionstore", .fn = cmd_zunionstore, .arity = -4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_MOVABLEKEYS,
	  .first_key = 1, .last_key = 1, .key_step = 1, .getkeys = cmd_zunionstore_keys,
	  .group = "sorted-set", .since = "2.0.0",
	  .summary = "Add multiple sorted sets and store the resulting sorted set in a new key",
	  .complexity = "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
	  .acl_categories = "@write @sortedset @slow", .key_flags = "OW update",
	  .rest_key_flags = "RO access" },
	{ .name = "zinterstore", .fn = cmd_zinterstore, .arity = -4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_MOVABLEKEYS,
	  .first_key = 1, .last_key = 1, .key_step = 1, .getkeys = cmd_zunionstore_keys,
	  .group = "sorted-set", .since = "2.0.0",
	  .summary = "Intersect multiple sorted sets and store the resulting sorted set in a new key",
	  .complexity = "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.",
	  .acl_categories = "@write @sortedset @slow", .key_flags = "OW update",
	  .rest_key_flags = "RO access" },
	{ .name = "zdiffstore", .fn = cmd_zdiffstore, .arity = -4, .flags = CMD_WRITE | CMD_DENYOOM | CMD_MOVABLEKEYS,
	  .first_key = 1, .last_key = 1, .key_step = 1, .getkeys = cmd_zunionstore_keys,
	  .group = "sorted-set", .since = "6.2.0",
	  .summary = "Subtract multiple sorted sets and store the resulting sorted set in a new key",
	  .complexity = "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.",
	  .acl_categories = "@write @sortedset @slow", .key_flags = "OW update",
	  .rest_key_flags = "RO access" },
	{ .name = "zintercard", .fn = cmd_zintercard, .arity = -3, .flags = CMD_READONLY | CMD_MOVABLEKEYS,
	  .first_key = 0, .last_key = 0, .key_step = 0, .getkeys = cmd_zunion_keys,
	  .group = "sorted-set", .since = "7.0.0",
	  .summary = "Intersect multiple sorted sets and return the cardinality of the result",
	  .complexity = "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.",
	  .acl_categories = "@read @sortedset @slow", .key_flags = "RO access" },

	/* ---- keyspace (cmd_keyspace.c) ---- */
	{ .name = "rename", .fn = cmd_rename, .arity = 3, .flags = CMD_WRITE, .first_key = 1,
	  .last_key = 2, .key_step = 1, .group = "generic", .since = "1.0.0",
	  .summary = "Rename a key", .complexity = "O(1)",
	  .acl_categories = "@keyspace @write @slow", .key_flags = "RW access delete",
	  .rest_key_flags = "OW update" },
	{ .name = "renamenx", .fn = cmd_renamenx, .arity = 3, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 2, .key_step = 1, .group = "generic", .since = "1.0.0",
	  .summary = "Rename a key, only if the new key does not exist", .complexity = "O(1)",
	  .acl_categories = "@keyspace @write @fast", .key_flags = "RW access delete",
	  .rest_key_flags = "OW insert" },
	{ .name = "copy", .fn = cmd_copy, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 2, .key_step = 1, .group = "generic", .since = "6.2.0",
	  .summary = "Copy a key",
	  .complexity = "O(N) worst case for collections, where N is the number of nested items. "
			"O(1) for string values.",
	  .acl_categories = "@keyspace @write @slow", .key_flags = "RO access",
	  .rest_key_flags = "OW update" },
	/* MOVE never moves with one database: no transaction (cmd_keyspace.c),
	 * nor anything read, so a script may call it. */
	{ .name = "move", .fn = cmd_move, .arity = 3,
	  .flags = CMD_WRITE | CMD_FAST | CMD_NOTXN | CMD_SCRIPT_NOTXN,
	  KEY1, .group = "generic", .since = "1.0.0", .summary = "Move a key to another database",
	  .complexity = "O(1)", .acl_categories = "@keyspace @write @fast",
	  .key_flags = "RW access update" },
	{ .name = "randomkey", .fn = cmd_randomkey, .arity = 1,
	  .flags = CMD_READONLY | CMD_NOTXN | CMD_SCRIPT_NOTXN | CMD_ALLKEYS, .group = "generic",
	  .since = "1.0.0",
	  .summary = "Return a random key from the keyspace", .complexity = "O(1)",
	  .acl_categories = "@keyspace @read @slow",
	  .tips = "request_policy:all_shards nondeterministic_output" },
	{ .name = "dump", .fn = cmd_dump, .arity = 2, .flags = CMD_READONLY, KEY1,
	  .group = "generic", .since = "2.6.0",
	  .summary = "Return a serialized version of the value stored at the specified key.",
	  .complexity = "O(1) to access the key and additional O(N*M) to serialize it, where N is "
			"the number of Redis objects composing the value and M their average "
			"size. For small string values the time complexity is thus O(1)+O(1*M) "
			"where M is small, so simply O(1).",
	  .acl_categories = "@keyspace @read @slow", .key_flags = "RO access",
	  .tips = "nondeterministic_output" },
	{ .name = "restore", .fn = cmd_restore, .arity = -4, .flags = CMD_WRITE | CMD_DENYOOM,
	  KEY1, .group = "generic", .since = "2.6.0",
	  .summary = "Create a key using the provided serialized value, previously obtained "
		     "using DUMP.",
	  .complexity = "O(1) to create the new key and additional O(N*M) to reconstruct the "
			"serialized value, where N is the number of Redis objects composing the "
			"value and M their average size. For small string values the time "
			"complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However "
			"for sorted set values the complexity is O(N*M*log(N)) because inserting "
			"values into sorted sets is O(log(N)).",
	  .acl_categories = "@keyspace @write @slow @dangerous", .key_flags = "OW update" },
	{ .name = "memory", .fn = cmd_memory, .arity = -2, .flags = CMD_NOTXN,
	  .group = "server", .since = "4.0.0", .summary = "A container for memory diagnostics commands",
	  .complexity = "Depends on subcommand.", .subcommands = memory_subs,
	  .acl_categories = "@slow" },
	{ .name = "object", .fn = cmd_object, .arity = -2, .flags = CMD_NOTXN,
	  .group = "generic", .since = "2.2.3",
	  .summary = "A container for object introspection commands",
	  .complexity = "Depends on subcommand.", .subcommands = object_subs,
	  .acl_categories = "@slow" },

	/* ---- persistence (save.c) ---- */
	{ .name = "save", .fn = cmd_save, .arity = 1,
	  .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_NOMULTI | CMD_NOTXN, .group = "server",
	  .since = "1.0.0", .summary = "Synchronously save the dataset to disk",
	  .complexity = "O(N) where N is the total number of keys in all databases",
	  .acl_categories = "@admin @slow @dangerous" },
	{ .name = "bgsave", .fn = cmd_bgsave, .arity = -1,
	  .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_NOTXN, .group = "server", .since = "1.0.0",
	  .summary = "Asynchronously save the dataset to disk", .complexity = "O(1)",
	  .acl_categories = "@admin @slow @dangerous" },
	{ .name = "lastsave", .fn = cmd_lastsave, .arity = 1,
	  .flags = CMD_LOADING | CMD_STALE | CMD_FAST | CMD_NOTXN | CMD_SCRIPT_NOTXN,
	  .group = "server",
	  .since = "1.0.0", .summary = "Get the UNIX time stamp of the last successful save to disk",
	  .complexity = "O(1)", .acl_categories = "@admin @fast @dangerous",
	  .tips = "nondeterministic_output" },

	/* ---- connection ---- */
	{ .name = "ping", .fn = cmd_ping, .arity = -1,
	  .flags = CMD_FAST | CMD_NOTXN | CMD_SCRIPT_NOTXN | CMD_SUBCTX,
	  .group = "connection", .since = "1.0.0", .summary = "Ping the server",
	  .complexity = "O(1)", .acl_categories = "@fast @connection",
	  .tips = "request_policy:all_shards response_policy:all_succeeded" },
	{ .name = "echo", .fn = cmd_echo, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_FAST | CMD_NOTXN | CMD_SCRIPT_NOTXN,
	  .group = "connection",
	  .since = "1.0.0", .summary = "Echo the given string", .complexity = "O(1)",
	  .acl_categories = "@fast @connection" },
	{ .name = "hello", .fn = cmd_hello, .arity = -1, .flags = F_PRELOGIN,
	  .group = "connection", .since = "6.0.0", .summary = "Handshake with Redis",
	  .complexity = "O(1)", .acl_categories = "@fast @connection" },
	{ .name = "auth", .fn = cmd_auth, .arity = -2, .flags = F_PRELOGIN,
	  .group = "connection", .since = "1.0.0", .summary = "Authenticate to the server",
	  .complexity = "O(N) where N is the number of passwords defined for the user",
	  .acl_categories = "@fast @connection" },
	{ .name = "quit", .fn = cmd_quit, .arity = -1,
	  .flags = F_PRELOGIN | CMD_MULTICTL | CMD_SUBCTX,
	  .group = "connection", .since = "1.0.0", .summary = "Close the connection",
	  .complexity = "O(1)", .acl_categories = "@fast @connection" },
	{ .name = "reset", .fn = cmd_reset, .arity = 1,
	  .flags = F_PRELOGIN | CMD_MULTICTL | CMD_SUBCTX,
	  .group = "connection", .since = "6.2.0", .summary = "Reset the connection",
	  .complexity = "O(1)", .acl_categories = "@fast @connection" },
	{ .name = "select", .fn = cmd_select, .arity = 2,
	  .flags = CMD_LOADING | CMD_STALE | CMD_FAST | CMD_NOTXN, .group = "connection",
	  .since = "1.0.0", .summary = "Change the selected database for the current connection",
	  .complexity = "O(1)", .acl_categories = "@fast @connection" },
	{ .name = "client", .fn = cmd_client, .arity = -2, .flags = CMD_NOTXN,
	  .group = "connection", .since = "2.4.0",
	  .summary = "A container for client connection commands",
	  .complexity = "Depends on subcommand.", .subcommands = client_subs,
	  .acl_categories = "@slow" },

	/* ---- server ---- */
	{ .name = "command", .fn = cmd_command, .arity = -1,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "server", .since = "2.8.13",
	  .summary = "Get array of Redis command details",
	  .complexity = "O(N) where N is the total number of Redis commands",
	  .subcommands = command_subs, .acl_categories = "@slow @connection",
	  .tips = "nondeterministic_output_order" },
	{ .name = "config", .fn = cmd_config, .arity = -2, .flags = CMD_NOTXN, .group = "server",
	  .since = "2.0.0", .summary = "A container for server configuration commands",
	  .complexity = "Depends on subcommand.", .subcommands = config_subs,
	  .acl_categories = "@slow" },
	{ .name = "info", .fn = cmd_info, .arity = -1,
	  .flags = CMD_LOADING | CMD_STALE | CMD_NOTXN, .group = "server", .since = "1.0.0",
	  .summary = "Get information and statistics about the server", .complexity = "O(1)",
	  .acl_categories = "@slow @dangerous",
	  .tips = "nondeterministic_output request_policy:all_shards response_policy:special" },
	{ .name = "time", .fn = cmd_time, .arity = 1,
	  .flags = CMD_LOADING | CMD_STALE | CMD_FAST | CMD_NOTXN | CMD_SCRIPT_NOTXN,
	  .group = "server",
	  .since = "2.6.0", .summary = "Return the current server time", .complexity = "O(1)",
	  .acl_categories = "@fast", .tips = "nondeterministic_output" },
	{ .name = "shutdown", .fn = cmd_shutdown, .arity = -1,
	  .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NOMULTI |
		   CMD_ALLOW_BUSY | CMD_NOTXN,
	  .group = "server", .since = "1.0.0",
	  .summary = "Synchronously save the dataset to disk and then shut down the server",
	  .complexity = "O(N) when saving, where N is the total number of keys in all "
			"databases when saving data, otherwise O(1)",
	  .acl_categories = "@admin @slow @dangerous" },
	{ .name = "role", .fn = cmd_role, .arity = 1,
	  .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_FAST | CMD_NOTXN,
	  .group = "server", .since = "2.8.12",
	  .summary = "Return the role of the instance in the context of replication",
	  .complexity = "O(1)", .acl_categories = "@admin @fast @dangerous" },
	{ .name = "wait", .fn = cmd_wait, .arity = 3, .flags = CMD_NOSCRIPT | CMD_NOTXN,
	  .group = "generic", .since = "3.0.0",
	  .summary = "Wait for the synchronous replication of all the write commands sent in the "
		     "context of the current connection",
	  .complexity = "O(1)", .acl_categories = "@slow @connection",
	  .tips = "request_policy:all_shards response_policy:agg_min" },
	{ .name = "latency", .fn = cmd_latency, .arity = -2, .flags = CMD_NOTXN,
	  .group = "server", .since = "2.8.13", .summary = "A container for latency diagnostics commands",
	  .complexity = "Depends on subcommand.", .subcommands = latency_subs,
	  .acl_categories = "@slow" },
	{ .name = "monitor", .fn = cmd_monitor, .arity = 1,
	  .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NOTXN,
	  .group = "server", .since = "1.0.0",
	  .summary = "Listen for all requests received by the server in real time",
	  .complexity = NULL, .acl_categories = "@admin @slow @dangerous" },
	{ .name = "acl", .fn = cmd_acl, .arity = -2, .flags = CMD_NOTXN, .group = "server",
	  .since = "6.0.0", .summary = "A container for Access List Control commands",
	  .complexity = "Depends on subcommand.", .subcommands = acl_subs, .acl_categories = "@slow" },
	{ .name = "slowlog", .fn = cmd_slowlog, .arity = -2, .flags = CMD_NOTXN,
	  .group = "server", .since = "2.2.12",
	  .summary = "A container for slow log commands", .complexity = "Depends on subcommand.",
	  .subcommands = slowlog_subs, .acl_categories = "@slow" },
	{ .name = "debug", .fn = cmd_debug, .arity = -2, .flags = F_SUBADMIN, .group = "server",
	  .since = "1.0.0", .summary = "A container for debugging commands",
	  .complexity = "Depends on subcommand.", .acl_categories = "@admin @slow @dangerous" },

	/* ---- scripting ---- */
	{ .name = "rckv", .fn = cmd_rckv, .arity = -2, .flags = CMD_NOTXN,
	  .group = "cluster", .since = "rckv", .summary = "rckv's cluster layout: NODES, KEYSLOT, KEYNODE",
	  .complexity = "Depends on subcommand.", .subcommands = rckv_subs, .acl_categories = "@slow" },
	{ .name = "eval", .fn = cmd_eval, .arity = -3, .flags = F_EVAL, .group = "scripting",
	  .since = "2.6.0", .summary = "Execute a Lua script server side",
	  .complexity = "Depends on the script that is executed.",
	  .acl_categories = "@slow @scripting", .key_flags = "RW access update",
	  .getkeys = script_getkeys },
	{ .name = "evalsha", .fn = cmd_evalsha, .arity = -3, .flags = F_EVAL,
	  .group = "scripting", .since = "2.6.0", .summary = "Execute a Lua script server side",
	  .complexity = "Depends on the script that is executed.",
	  .acl_categories = "@slow @scripting", .key_flags = "RW access update",
	  .getkeys = script_getkeys },
	{ .name = "eval_ro", .fn = cmd_eval_ro, .arity = -3, .flags = F_EVAL | CMD_READONLY,
	  .group = "scripting", .since = "7.0.0",
	  .summary = "Execute a read-only Lua script server side",
	  .complexity = "Depends on the script that is executed.",
	  .acl_categories = "@slow @scripting", .key_flags = "RO access",
	  .getkeys = script_getkeys },
	{ .name = "evalsha_ro", .fn = cmd_evalsha_ro, .arity = -3, .flags = F_EVAL | CMD_READONLY,
	  .group = "scripting", .since = "7.0.0",
	  .summary = "Execute a read-only Lua script server side",
	  .complexity = "Depends on the script that is executed.",
	  .acl_categories = "@slow @scripting", .key_flags = "RO access",
	  .getkeys = script_getkeys },
	{ .name = "script", .fn = cmd_script, .arity = -2, .flags = CMD_NOTXN,
	  .group = "scripting", .since = "2.6.0",
	  .summary = "A container for Lua scripts management commands",
	  .complexity = "Depends on subcommand.", .subcommands = script_subs,
	  .acl_categories = "@slow" },
	{ .name = "function", .fn = cmd_function, .arity = -2, .flags = CMD_NOTXN,
	  .group = "scripting", .since = "7.0.0", .summary = "A container for function commands",
	  .complexity = "Depends on subcommand.", .subcommands = function_subs,
	  .acl_categories = "@slow" },

	/* ---- pubsub ----
	 * PUBLISH and SPUBLISH are CMD_SCRIPT_NOTXN: given a transaction (a
	 * script's, an EXEC's), they queue the message until it commits
	 * (ps_defer), so a retried attempt sends nothing twice. */
	{ .name = "subscribe", .fn = cmd_subscribe, .arity = -2, .flags = F_PSUB,
	  .group = "pubsub", .since = "2.0.0", .summary = "Listen for messages published to the "
							  "given channels",
	  .complexity = "O(N) where N is the number of channels to subscribe to.",
	  .acl_categories = "@pubsub @slow" },
	{ .name = "unsubscribe", .fn = cmd_unsubscribe, .arity = -1, .flags = F_PSUB,
	  .group = "pubsub", .since = "2.0.0", .summary = "Stop listening for messages posted to "
							  "the given channels",
	  .complexity = "O(N) where N is the number of clients already subscribed to a channel.",
	  .acl_categories = "@pubsub @slow" },
	{ .name = "psubscribe", .fn = cmd_psubscribe, .arity = -2, .flags = F_PSUB,
	  .group = "pubsub", .since = "2.0.0", .summary = "Listen for messages published to "
							  "channels matching the given patterns",
	  .complexity = "O(N) where N is the number of patterns the client is already subscribed "
			"to.",
	  .acl_categories = "@pubsub @slow" },
	{ .name = "punsubscribe", .fn = cmd_punsubscribe, .arity = -1, .flags = F_PSUB,
	  .group = "pubsub", .since = "2.0.0", .summary = "Stop listening for messages posted to "
							  "channels matching the given patterns",
	  .complexity = "O(N+M) where N is the number of patterns the client is already "
			"subscribed and M is the number of total patterns subscribed in the "
			"system (by any client).",
	  .acl_categories = "@pubsub @slow" },
	{ .name = "ssubscribe", .fn = cmd_ssubscribe, .arity = -2, .flags = F_PSUB,
	  .first_key = 1, .last_key = -1, .key_step = 1, .group = "pubsub", .since = "7.0.0",
	  .summary = "Listen for messages published to the given shard channels",
	  .complexity = "O(N) where N is the number of shard channels to subscribe to.",
	  .acl_categories = "@pubsub @slow", .key_flags = "RO" },
	{ .name = "sunsubscribe", .fn = cmd_sunsubscribe, .arity = -1, .flags = F_PSUB,
	  .first_key = 1, .last_key = -1, .key_step = 1, .group = "pubsub", .since = "7.0.0",
	  .summary = "Stop listening for messages posted to the given shard channels",
	  .complexity = "O(N) where N is the number of clients already subscribed to a shard "
			"channel.",
	  .acl_categories = "@pubsub @slow", .key_flags = "RO" },
	{ .name = "publish", .fn = cmd_publish, .arity = 3,
	  .flags = CMD_PUBSUB | CMD_LOADING | CMD_STALE | CMD_FAST | CMD_MAY_REPLICATE |
		   CMD_NOTXN | CMD_SCRIPT_NOTXN,
	  .group = "pubsub", .since = "2.0.0", .summary = "Post a message to a channel",
	  .complexity = "O(N+M) where N is the number of clients subscribed to the receiving "
			"channel and M is the total number of subscribed patterns (by any "
			"client).",
	  .acl_categories = "@pubsub @fast" },
	{ .name = "spublish", .fn = cmd_spublish, .arity = 3,
	  .flags = CMD_PUBSUB | CMD_LOADING | CMD_STALE | CMD_FAST | CMD_MAY_REPLICATE |
		   CMD_NOTXN | CMD_SCRIPT_NOTXN,
	  .first_key = 1, .last_key = 1, .key_step = 1, .group = "pubsub", .since = "7.0.0",
	  .summary = "Post a message to a shard channel",
	  .complexity = "O(N) where N is the number of clients subscribed to the receiving shard "
			"channel.",
	  .acl_categories = "@pubsub @fast", .key_flags = "RO" },
	{ .name = "pubsub", .fn = cmd_pubsub, .arity = -2, .flags = CMD_NOTXN, .group = "pubsub",
	  .since = "2.8.0", .summary = "A container for Pub/Sub commands",
	  .complexity = "Depends on subcommand.", .subcommands = pubsub_subs,
	  .acl_categories = "@slow" },

	/* ---- transactions ----
	 * UNWATCH has no CMD_MULTICTL: Redis 7.0 queues it inside MULTI. */
	{ .name = "multi", .fn = cmd_multi, .arity = 1,
	  .flags = F_TXCTL | CMD_FAST | CMD_ALLOW_BUSY | CMD_MULTICTL, .group = "transactions",
	  .since = "1.2.0", .summary = "Mark the start of a transaction block",
	  .complexity = "O(1)", .acl_categories = "@fast @transaction" },
	{ .name = "exec", .fn = cmd_exec, .arity = 1,
	  .flags = F_TXCTL | CMD_SKIP_SLOWLOG | CMD_MULTICTL | CMD_TXNBLOCK,
	  .group = "transactions",
	  .since = "1.2.0", .summary = "Execute all commands issued after MULTI",
	  .complexity = "Depends on commands in the transaction",
	  .acl_categories = "@slow @transaction" },
	{ .name = "discard", .fn = cmd_discard, .arity = 1,
	  .flags = F_TXCTL | CMD_FAST | CMD_ALLOW_BUSY | CMD_MULTICTL, .group = "transactions",
	  .since = "2.0.0", .summary = "Discard all commands issued after MULTI",
	  .complexity = "O(N), when N is the number of queued commands",
	  .acl_categories = "@fast @transaction" },
	{ .name = "watch", .fn = cmd_watch, .arity = -2,
	  .flags = F_TXCTL | CMD_FAST | CMD_ALLOW_BUSY | CMD_MULTICTL, .first_key = 1,
	  .last_key = -1, .key_step = 1, .group = "transactions", .since = "2.2.0",
	  .summary = "Watch the given keys to determine execution of the MULTI/EXEC block",
	  .complexity = "O(1) for every key.", .acl_categories = "@fast @transaction",
	  .key_flags = "RO" },
	{ .name = "unwatch", .fn = cmd_unwatch, .arity = 1,
	  .flags = F_TXCTL | CMD_FAST | CMD_ALLOW_BUSY, .group = "transactions",
	  .since = "2.2.0", .summary = "Forget about all watched keys", .complexity = "O(1)",
	  .acl_categories = "@fast @transaction" },
	{ .name = NULL },
};

#define NCOMMANDS ((int)(sizeof(table) / sizeof(table[0])) - 1)

/* ---- lookup index ---- */

#define IDX_SLOTS 1024 /* power of two, several times NCOMMANDS */
#define NAME_MAX_LEN 32 /* longer than any command name: such names miss at once */

static_assert(IDX_SLOTS >= 4 * (sizeof(table) / sizeof(table[0])), "keep the index sparse");
static_assert(sizeof(table) / sizeof(table[0]) < 255, "idx_slot holds a row + 1 in a byte");

/* Written once by build_index() before main (a constructor), read-only after. */
static uint8_t idx_slot[IDX_SLOTS]; /* table row + 1; 0 = empty */

static uint32_t name_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a over ASCII-lowered bytes */
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch >= 'A' && ch <= 'Z')
			ch = (unsigned char)(ch + 32);
		h = (h ^ ch) * 16777619u;
	}
	return h;
}

/*
 * Command ids (cmd_id): the rows of `table` are 0..NCOMMANDS-1, then each
 * container's subcommand rows follow, container by container. sub_ranges
 * maps a subcommand array to its first id. Written once by build_index.
 */
#define MAX_CONTAINERS 32
static struct {
	const struct cmd_def *first;
	int n, base;
} sub_ranges[MAX_CONTAINERS];
static int nsub_ranges, nids;
static const struct cmd_def *by_id[1024];

__attribute__((constructor)) static void build_index(void)
{
	nids = NCOMMANDS;
	for (int i = 0; i < NCOMMANDS; i++) {
		by_id[i] = &table[i];
		const struct cmd_def *s = table[i].subcommands;
		if (!s)
			continue;
		if (nsub_ranges == MAX_CONTAINERS) {
			fprintf(stderr, "rckv: more than %d container commands\n", MAX_CONTAINERS);
			abort();
		}
		int k = 0;
		while (s[k].name) {
			if (nids == (int)(sizeof(by_id) / sizeof(by_id[0]))) {
				fprintf(stderr, "rckv: too many command rows\n");
				abort();
			}
			by_id[nids++] = &s[k++];
		}
		sub_ranges[nsub_ranges].first = s;
		sub_ranges[nsub_ranges].n = k;
		sub_ranges[nsub_ranges].base = nids - k;
		nsub_ranges++;
	}
	for (int i = 0; i < NCOMMANDS; i++) {
		size_t len = strlen(table[i].name);
		/* Always on: a name too long for lookup or a duplicate row would
		 * make a command silently unreachable. */
		if (len >= NAME_MAX_LEN) {
			fprintf(stderr, "rckv: command name '%s' too long\n", table[i].name);
			abort();
		}
		uint32_t s = name_hash(table[i].name, len) & (IDX_SLOTS - 1);
		while (idx_slot[s]) {
			if (strcmp(table[idx_slot[s] - 1].name, table[i].name) == 0) {
				fprintf(stderr, "rckv: command '%s' listed twice\n", table[i].name);
				abort();
			}
			s = (s + 1) & (IDX_SLOTS - 1);
		}
		idx_slot[s] = (uint8_t)(i + 1);
	}
}

int cmd_id(const struct cmd_def *d)
{
	if (d >= table && d < table + NCOMMANDS)
		return (int)(d - table);
	for (int i = 0; i < nsub_ranges; i++)
		if (d >= sub_ranges[i].first && d < sub_ranges[i].first + sub_ranges[i].n)
			return sub_ranges[i].base + (int)(d - sub_ranges[i].first);
	return -1;
}

int cmd_id_count(void)
{
	return nids;
}

const struct cmd_def *cmd_by_id(int id)
{
	return id >= 0 && id < nids ? by_id[id] : NULL;
}

const struct cmd_def *cmd_lookup(const char *name, size_t len)
{
	if (len == 0 || len >= NAME_MAX_LEN)
		return NULL;
	uint32_t s = name_hash(name, len) & (IDX_SLOTS - 1);
	for (; idx_slot[s]; s = (s + 1) & (IDX_SLOTS - 1)) {
		const struct cmd_def *d = &table[idx_slot[s] - 1];
		if (strncasecmp(d->name, name, len) == 0 && d->name[len] == '\0')
			return d;
	}
	return NULL;
}

const struct cmd_def *cmd_lookup_sub(const struct cmd_def *parent, const char *name, size_t len)
{
	if (!parent || !parent->subcommands)
		return NULL;
	for (const struct cmd_def *d = parent->subcommands; d->name; d++) {
		const char *bar = strchr(d->name, '|');
		const char *sub = bar ? bar + 1 : d->name;
		if (strlen(sub) == len && strncasecmp(sub, name, len) == 0)
			return d;
	}
	return NULL;
}

const struct cmd_def *cmd_table(int *count)
{
	if (count)
		*count = NCOMMANDS;
	return table;
}

int cmd_flag_names(uint32_t flags, const char **names, int max)
{
	/* COMMAND INFO's order (Redis 7.0). */
	static const struct {
		uint32_t bit;
		const char *name;
	} order[] = {
		{ CMD_WRITE, "write" },          { CMD_READONLY, "readonly" },
		{ CMD_DENYOOM, "denyoom" },      { CMD_ADMIN, "admin" },
		{ CMD_PUBSUB, "pubsub" },
		{ CMD_NOSCRIPT, "noscript" },    { CMD_BLOCKING, "blocking" },
		{ CMD_LOADING, "loading" },
		{ CMD_STALE, "stale" },          { CMD_SKIP_MONITOR, "skip_monitor" },
		{ CMD_SKIP_SLOWLOG, "skip_slowlog" }, { CMD_FAST, "fast" },
		{ CMD_NOAUTH, "no_auth" },       { CMD_MAY_REPLICATE, "may_replicate" },
		{ CMD_NO_MANDATORY_KEYS, "no_mandatory_keys" },
		{ CMD_NOMULTI, "no_multi" },     { CMD_MOVABLEKEYS, "movablekeys" },
		{ CMD_ALLOW_BUSY, "allow_busy" },
	};
	int n = 0;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if ((flags & order[i].bit) && n < max)
			names[n++] = order[i].name;
	return n;
}

int cmd_get_keys(const struct cmd_def *d, int argc, const struct resp_arg *argv, int *idx,
		 int max)
{
	if (d && d->getkeys)
		return d->getkeys(argc, argv, idx, max);
	if (!d || d->first_key <= 0 || argc <= d->first_key)
		return 0;
	int last = d->last_key < 0 ? argc + d->last_key : d->last_key;
	if (last >= argc)
		last = argc - 1;
	int step = d->key_step > 0 ? d->key_step : 1;
	int n = 0;
	for (int i = d->first_key; i <= last && n < max; i += step)
		idx[n++] = i;
	return n;
}

const char *cmd_key_flags(const struct cmd_def *d, int argc, const struct resp_arg *argv,
			  int pos)
{
	if (d->rest_key_flags && pos > d->first_key)
		return d->rest_key_flags;
	if (d->var_key_flags)
		return d->var_key_flags(argc, argv);
	return d->key_flags;
}

bool cmd_reserved_key(const struct cmd_def *d, int argc, const struct resp_arg *argv)
{
	int stack[16];
	int *idx = argc <= 16 ? stack : malloc((size_t)argc * sizeof(int));
	if (!idx)
		return false; /* the command then fails for memory anyway */
	int n = cmd_get_keys(d, argc, argv, idx, argc);
	bool hit = false;
	for (int i = 0; i < n && !hit; i++)
		hit = pl_reserved_key(argv[idx[i]].p, argv[idx[i]].len);
	if (idx != stack)
		free(idx);
	return hit;
}

/* ---- reply helpers ---- */

/* The full name of the command being run, as Redis names it in errors. */
static const char *full_name(const struct cmd_ctx *c, char *buf, size_t cap)
{
	if (c->argc < 1)
		return "";
	const struct cmd_def *d = cmd_lookup(c->argv[0].p, c->argv[0].len);
	if (!d) {
		snprintf(buf, cap, "%.*s", (int)(c->argv[0].len < 128 ? c->argv[0].len : 128),
			 c->argv[0].p);
		return buf;
	}
	if (d->subcommands && c->argc >= 2) {
		const struct cmd_def *sub = cmd_lookup_sub(d, c->argv[1].p, c->argv[1].len);
		if (sub)
			return sub->name;
	}
	return d->name;
}

void cmd_reply_wrong_args(struct cmd_ctx *c)
{
	char buf[160];
	resp_errorf(c->out, "ERR wrong number of arguments for '%s' command",
		    full_name(c, buf, sizeof(buf)));
}

void cmd_reply_syntax(struct cmd_ctx *c)
{
	resp_error(c->out, "ERR syntax error");
}

void cmd_reply_not_int(struct cmd_ctx *c)
{
	resp_error(c->out, "ERR value is not an integer or out of range");
}

/* True if some key argument of the running command is over max-key-bytes. */
static bool key_too_big(const struct cmd_ctx *c)
{
	const struct cmd_def *d = cmd_lookup(c->argv[0].p, c->argv[0].len);
	int idx[64];
	int n = cmd_get_keys(d, c->argc, c->argv, idx, 64);
	long long max = (long long)ck_pr_load_64((uint64_t *)&c->node->cfg.max_key_bytes);
	for (int i = 0; i < n; i++)
		if ((long long)c->argv[idx[i]].len > max)
			return true;
	return false;
}

void cmd_reply_txn_error(struct cmd_ctx *c, int rc)
{
	c->failed = true;
	switch (rc) {
	case CC_EFULL:
		/* Not maxmemory's text (server/memory.h): the region itself has
		 * no room, which CONFIG SET cannot change. The OOM code keeps
		 * clients' handling of Redis's out-of-memory refusals. */
		resp_error(c->out, SRV_OOM_STORE_FULL);
		break;
	case CC_ETOOBIG:
		/* Redis's text for its own limit is "ERR string exceeds maximum
		 * allowed size (proto-max-bulk-len)"; name rckv's limit that
		 * was hit instead. */
		if (c->node && key_too_big(c))
			resp_error(c->out, "ERR string exceeds maximum allowed size (max-key-bytes)");
		else
			resp_error(c->out,
				   "ERR string exceeds maximum allowed size (max-value-bytes)");
		break;
	case CC_EFAB:
		resp_error(c->out, "ERR fabric error: a peer node did not answer");
		break;
	case COLL_EWRONGTYPE:
		resp_error(c->out, COLL_WRONGTYPE_MSG);
		break;
	case COLL_ECORRUPT:
		resp_error(c->out, "ERR internal error: a collection's stored value does not parse");
		break;
	default:
		resp_errorf(c->out, "ERR %s", cc_strerror(rc));
		break;
	}
}

int cmd_txn_failed(struct cmd_ctx *c, size_t mark, int rc)
{
	c->out->len = mark;
	if (rc == CC_ABORT)
		return CC_ABORT;
	if (rc == COLL_EWRONGTYPE) {
		/* A reply, not a failure: handlers meet it before they write
		 * (so nothing is rolled back, and a script's pcall sees it). */
		resp_error(c->out, COLL_WRONGTYPE_MSG);
		return 0;
	}
	cmd_reply_txn_error(c, rc);
	return 0;
}

void cmd_count_lookup(struct cmd_ctx *c, bool found)
{
	if (!c->w)
		return;
	if (found)
		c->w->stats.keyspace_hits++;
	else
		c->w->stats.keyspace_misses++;
}

int cmd_read_key1(struct cmd_ctx *c, cmd_reply1 reply1)
{
	const char *v;
	size_t vlen;
	bool found;
	struct txn_meta m;
	int rc = txn_get_meta(c->txn, c->argv[1].p, c->argv[1].len, &v, &vlen, &found, &m);
	if (rc)
		return cmd_txn_failed(c, c->out->len, rc);
	c->ktype = m.type;
	reply1(c, found, v, vlen);
	return 0;
}

bool cmd_reply_wrongtype(struct cmd_ctx *c, bool found, uint8_t want)
{
	if (!found || c->ktype == want)
		return false;
	resp_error(c->out, COLL_WRONGTYPE_MSG);
	return true;
}

int cmd_get_string(struct cmd_ctx *c, const char *key, size_t klen, const char **v, size_t *vl,
		   bool *found)
{
	struct txn_meta m;
	int rc = txn_get_meta(c->txn, key, klen, v, vl, found, &m);
	if (rc == CC_OK && *found && m.type != TXN_T_STRING)
		return COLL_EWRONGTYPE;
	return rc;
}
