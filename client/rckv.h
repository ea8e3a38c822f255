/*
 * librckv: a small C client for rckv on top of hiredis (DESIGN.md section 2,
 * client/). It knows what a plain Redis client does not: where keys live.
 *
 *  - connections: rckv_connect() opens a hiredis connection with bounded
 *    connect and I/O timeouts;
 *  - the slot map: rckv_map_fetch() asks any node `RCKV NODES` and builds a
 *    table slot -> node; rckv_keyslot() is Redis Cluster's function (CRC16
 *    XMODEM of the key or of its non-empty {hash tag}, mod 16384), the
 *    same one the server uses (placement/), so a client predicts
 *    placement exactly;
 *  - the cluster file: rckv_cluster_file_read() reads the node addresses
 *    from a cluster configuration file (one `cluster-node` line per node).
 *
 * Errors: functions returning int give 0 on success and a negative RCKV_E*
 * code (or -errno) on failure; rckv_strerror() names the code, and the
 * functions that take an `err` buffer also write a sentence for the user.
 *
 * Threads: nothing here keeps global state except placement's CRC table,
 * which is built once under pthread_once; a redisContext must be used by one thread
 * at a time, as hiredis requires; a struct rckv_map may be read by any
 * number of threads once built.
 */
#ifndef RCKV_CLIENT_RCKV_H
#define RCKV_CLIENT_RCKV_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#define RCKV_SLOTS 16384
#define RCKV_MAX_NODES 64
#define RCKV_NO_OWNER 0xff /* owner[] value of a slot no node claims */

enum {
	RCKV_ECONNECT = -3000, /* could not connect, or the connection broke */
	RCKV_EREPLY = -3001,   /* the server answered with an error reply */
	RCKV_EPROTO = -3002,   /* a reply of an unexpected shape */
	RCKV_ENOTRCKV = -3003, /* the server does not know RCKV (a plain Redis) */
	RCKV_EPARSE = -3004,   /* a malformed cluster file */
	RCKV_ERANGE = -3005,   /* too many nodes, or a slot outside 0..16383 */
};

/* Static description of an error code (RCKV_E* or -errno). */
const char *rckv_strerror(int err);

struct rckv_node {
	int id;              /* node id as the cluster names it */
	char host[64];       /* client address */
	int port;            /* client port */
	char fabric[128];    /* fabric address; "" when there is none (shm) */
};

/* Which node owns each slot. Built whole, then read-only. */
struct rckv_map {
	int nnodes;
	struct rckv_node nodes[RCKV_MAX_NODES];
	uint8_t owner[RCKV_SLOTS]; /* index into nodes[], or RCKV_NO_OWNER */
};

/* CRC-16/XMODEM (polynomial 0x1021, initial 0), Redis Cluster's CRC. */
uint16_t rckv_crc16(const void *buf, size_t len);

/* The slot (0..16383) of a key; a non-empty {hash tag} is hashed alone. */
unsigned rckv_keyslot(const char *key, size_t len);

/* The index into m->nodes[] of the node owning the key (RCKV_NO_OWNER if
 * no node claims its slot, which rckv_map_from_reply never lets through). */
static inline int rckv_map_node_of(const struct rckv_map *m, const char *key, size_t len)
{
	return m->owner[rckv_keyslot(key, len)];
}

/*
 * rckv_map_single - a map in which one node (id 1, host:port, no fabric
 * address) owns every slot: what a standalone server looks like.
 */
void rckv_map_single(struct rckv_map *m, const char *host, int port);

/*
 * rckv_map_from_reply - build a map from the reply of `RCKV NODES`: an
 * array of [id, host, port, fabric-address, [[start, end], ...]].
 * Every slot must be owned by exactly one node.
 * Returns 0, RCKV_EPROTO (shape), RCKV_ERANGE (too many nodes, bad or
 * overlapping slot ranges, or a slot without owner); err gets the reason.
 */
int rckv_map_from_reply(const redisReply *r, struct rckv_map *m, char *err, size_t errlen);

/*
 * rckv_map_fetch - send `RCKV NODES` on c and build the map from its reply.
 * Returns 0; RCKV_ENOTRCKV when the server answers that the command is
 * unknown (a Redis server: the caller decides whether a standalone map
 * will do); RCKV_ECONNECT on I/O failure; RCKV_EREPLY for another error
 * reply; or an error of rckv_map_from_reply. err gets the reason.
 */
int rckv_map_fetch(redisContext *c, struct rckv_map *m, char *err, size_t errlen);

/*
 * rckv_connect - a blocking hiredis connection to host:port, with a connect
 * timeout and the same bound on each later read or write (timeout_ms > 0).
 * Returns the context, or NULL with err filled (refused, timed out, ...).
 * Free it with redisFree().
 */
redisContext *rckv_connect(const char *host, int port, int timeout_ms, char *err, size_t errlen);

/* The nodes a cluster file lists, in file order. */
struct rckv_cluster_file {
	int n;
	struct rckv_node nodes[RCKV_MAX_NODES];
};

/*
 * rckv_cluster_parse_line - parse one line of a cluster file.
 * A node line is `cluster-node <id> <host>:<port> [<fabric-address>]`, as in
 * conf/cluster-3.conf (`node` is accepted for the same; an IPv6 host is
 * written in brackets, [::1]:7000); blank lines, '#' comments and lines
 * with any other first word are skipped (other directives belong to the
 * server). This function is the only place that
 * knows the format, so a change of format changes only it.
 * Returns 1 and fills *out for a node line, 0 for a line to skip, or
 * RCKV_EPARSE with the reason in err.
 */
int rckv_cluster_parse_line(const char *line, struct rckv_node *out, char *err, size_t errlen);

/*
 * rckv_cluster_file_read - read every node line of the file at path.
 * Returns 0 (at least one node), -errno if the file cannot be read,
 * RCKV_EPARSE (err names file:line and the reason, or says no node line
 * was found), RCKV_ERANGE for more than RCKV_MAX_NODES nodes or a
 * duplicate node id.
 */
int rckv_cluster_file_read(const char *path, struct rckv_cluster_file *out, char *err,
			   size_t errlen);

#endif
