/*
 * exec: the transaction executor of a worker. It runs a transaction body on
 * the calling coroutine, retries it after a CC abort with randomized
 * exponential backoff within txn-timeout (DESIGN.md section 5), and counts
 * commits, aborts and verbs in the worker's stats.
 */
#ifndef RCKV_CC_EXEC_H
#define RCKV_CC_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cc_node;
struct txn;
struct cc_worker;
struct sched;
struct fab_worker;

/*
 * A transaction body: runs the commands of one transaction through
 * cc/txn.h. Returns CC_OK to commit or CC_ABORT (the attempt is rolled
 * back and the body runs again from the start, so it must reset whatever
 * output it produced).
 */
typedef int (*cc_body_fn)(struct txn *t, void *arg);

/* How a transaction declares it uses a key (the command table's key
 * specs: RO reads, OW writes blind, RW and RM read, then write). */
enum { CC_KEY_READ = 1, CC_KEY_WRITE = 2 };
struct cc_key {
	const char *p;
	uint32_t len;
	uint8_t access;           /* CC_KEY_READ | CC_KEY_WRITE */
};

/*
 * A declared transaction (DESIGN.md section 5): its keys, each with its
 * access, and its commands (the body). The executor runs RCC's stages:
 * fetch (every declared key resolved and read in one batch per node, all
 * nodes in flight together; under a 2PL protocol, locked too), execute
 * (the body, on the fetched images: a declared key costs no fabric
 * operation there), commit (the protocol's). A key the body reaches that
 * was not declared is fetched when reached, a second fetch round of one
 * key; a body that learns several keys from values it read fetches them
 * in one more round with cc_fetch_more (later keys that depend on earlier
 * values: scripts). keys may repeat a key; nkeys may be 0.
 */
struct cc_txn {
	const struct cc_key *keys;
	int nkeys;
	cc_body_fn body;
	void *arg;
	/* If not NULL: when cc_run returns 0, the changes the committed
	 * attempt made: each txn_set* once, each txn_del of a present key
	 * once, none of a command rolled back to its savepoint. For INFO's
	 * rdb_changes_since_last_save, which counts as Redis's dirty counter
	 * does (MSET of 3 keys: 3; SET NX that sets nothing, DEL of an absent
	 * key: 0). Untouched otherwise. */
	uint64_t *changes;
};

/*
 * cc_worker_create - executor state of worker `id` of node n (0 <= id <
 * n->nworkers), whose coroutines are `sched` and fabric endpoints `fw`:
 * its address cache, timestamp clock, transaction records and epoch
 * record; it is entered in n->workers[id]. Created before the worker
 * serves, on any thread. NULL if out of memory.
 */
struct cc_worker *cc_worker_create(struct cc_node *n, int id, struct sched *sched,
				   struct fab_worker *fw);
/* After the worker stopped: leave n->workers and free. */
void cc_worker_destroy(struct cc_worker *ccw);

/*
 * cc_run - run tx as one serializable transaction. Must be called on a
 * coroutine of ccw's scheduler (it yields while waiting). Returns 0 once an
 * attempt committed; the body's error; or CC_ETIMEOUT when txn-timeout
 * passed with every attempt aborted (nothing of the transaction is
 * visible).
 */
int cc_run(struct cc_worker *ccw, const struct cc_txn *tx);

/*
 * cc_fetch_more - a further fetch round, from inside a body: keys it
 * learned from values it read (a key named by another key's value, a
 * script's computed keys) are resolved and read as the declared ones
 * were, in one batch per node (cc/fetch.c), so that the txn_get calls
 * that follow cost no fabric operation. RCC's repeated fetch/execute
 * rounds. Keys already touched are left as they are. Returns CC_OK, or
 * what a read returns (CC_ABORT: the body returns it, and the executor
 * retries the whole transaction).
 */
int cc_fetch_more(struct txn *t, const struct cc_key *keys, int nkeys);

/*
 * cc_key_absent - true if key is absent in committed state and no
 * transaction is writing it, as of an instant during the call (cc/txn.c
 * says why): a read-only command of this one key may then reply without a
 * transaction. False when the key may exist, and on any failure (a
 * transaction then runs and meets it). Coroutine of the worker only.
 */
bool cc_key_absent(struct cc_worker *ccw, const char *key, size_t klen);

/*
 * cc_wait_lease - a replicated cluster's node serves while its lease
 * lasts (server/membership.c). Without one, wait for it until *deadline
 * (0: txn-timeout from now, set here): a failover withholds leases for a
 * moment. CC_OK, or CC_ENOTSERVING at the deadline, or at once when the
 * node is out of the configuration or has known no leader for a while.
 * Without leases (cc_node.lease_until_ns 0), CC_OK. Coroutine only.
 */
int cc_wait_lease(struct cc_worker *ccw, uint64_t *deadline);

/*
 * cc_read_copies - the key's copy on every node of its replica set, primary
 * first, read with no transaction and no lock (RCKV COPIES, a diagnostic:
 * a commit in flight may be seen on some copies and not others). out holds
 * PL_MAX_REPLICAS; each copy's val is malloc'd (the caller frees it).
 * Returns the number of copies, or -1 if out of memory. Coroutine of the
 * worker only.
 */
enum { CC_COPY_FOUND, CC_COPY_ABSENT, CC_COPY_ERROR };
struct cc_copy {
	uint16_t node;
	int state;          /* CC_COPY_* (ERROR: the node did not answer) */
	uint64_t ver;
	char *val;
	uint32_t vlen;
};
int cc_read_copies(struct cc_worker *ccw, const char *key, size_t klen, struct cc_copy *out);

/* Called by the worker each time it wakes: the next timestamp reads the
 * clock afresh (between wake-ups, stamps reuse one reading a few times). */
void cc_worker_tick(struct cc_worker *ccw);

/* Called by the worker after each pass of its loop has run its coroutines:
 * the commits they queued for group commit during the pass go to the
 * flusher together, as one round (cc/durable.c, durable_ring). True when
 * the round was synced on this thread and woke coroutines: the worker
 * runs them and sends their replies before it waits again. */
bool cc_worker_pass_end(struct cc_worker *ccw);

/* True when the worker must run another pass before it waits for events:
 * coroutines woken by the last pass queued commits that no one would sync
 * while it sleeps (durable_pass_due). */
bool cc_worker_pass_due(const struct cc_worker *ccw);

/* Initialize a fabric batch for a coroutine of worker ccw: waits yield the
 * coroutine (sleep, park/unpark) instead of blocking the thread. */
struct fab_batch;
struct fab_stats;
void cc_batch_init(struct fab_batch *b, struct cc_worker *ccw, struct fab_stats *stats);

/* Enter/leave the node's in-flight count without a transaction (waits
 * while the node is quiesced). Used around work that must not overlap a
 * protocol switch. */
void cc_enter(struct cc_worker *ccw);
void cc_leave(struct cc_worker *ccw);

#endif
