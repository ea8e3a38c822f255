/*
 * acl: users, their passwords and permissions, as Redis 7.0's ACL
 * (https://redis.io/docs/management/security/acl/): the `default` user,
 * ACL SETUSER's rules (on/off, passwords, key and channel patterns,
 * commands and categories), the checks dispatch and scripts make before a
 * command runs, and the ACL LOG of refusals. The ACL command itself is in
 * cmd_acl.c.
 *
 * Users live on the node the client talks to: every node of a cluster has
 * its own, set with ACL SETUSER (or requirepass) on each node, as Redis
 * Cluster does.
 *
 * Threads. The user table is the node's, under acl's mutex: any worker may
 * read or change it (AUTH, ACL SETUSER). A client never holds a user: it
 * holds a reference to an acl_perm, an immutable snapshot of its user's
 * permissions, and the table generation it took it at. Invariants:
 *  (1) an acl_perm is never written once published; ACL SETUSER builds a
 *      new one and replaces the user's pointer under the mutex.
 *  (2) every change to the table increments node.acl_gen (ck_pr store
 *      under the mutex); a client whose generation differs looks its user
 *      up again before its next command (acl_refresh), so it never runs a
 *      command with permissions older than the last change it could see.
 *  (3) an acl_perm is freed when its last reference goes (ck_pr_dec).
 * The fast path (acl_fast_ok) is one load and two compares: a client of a
 * user with every command, key and channel does no further work.
 */
#ifndef RCKV_SRV_ACL_H
#define RCKV_SRV_ACL_H

#include <ck_pr.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resp/resp.h"

struct node;
struct worker;
struct client;
struct cmd_def;

/* One user's permissions: immutable once published (invariant (1)). */
struct acl_perm {
	int refs;         /* ck_pr_inc/dec (invariant (3)) */
	bool all;         /* every command, key and channel: no check at all */
	bool allcmds, allkeys, allchannels;
	char *name;       /* the user's name (ACL WHOAMI, CLIENT LIST user=) */
	int npat, nchan;
	struct acl_pat *pats;  /* key patterns (~, %R~, %W~) */
	struct acl_pat *chans; /* channel patterns (&) */
	uint64_t cmds[];  /* a bit per cmd_id (command.h): may run it */
};

struct acl_pat {
	char *p;
	size_t len;
	uint8_t perm; /* ACL_PERM_READ | ACL_PERM_WRITE */
};
enum { ACL_PERM_READ = 1, ACL_PERM_WRITE = 2 };

/* Why a command is refused (ACL LOG's reasons). */
enum acl_deny { ACL_OK = 0, ACL_DENY_CMD, ACL_DENY_KEY, ACL_DENY_CHANNEL };
/* Where it was refused (ACL LOG's context). */
enum acl_ctx { ACL_CTX_TOPLEVEL, ACL_CTX_MULTI, ACL_CTX_LUA };

/* Create the node's table with the default user (on nopass ~* &* +@all),
 * then apply requirepass if set. Main thread, before workers start.
 * Returns 0 or -ENOMEM. */
int acl_create(struct node *n);
void acl_destroy(struct node *n);

/*
 * acl_set_requirepass - what CONFIG SET requirepass does to the default
 * user, as Redis: "" makes it nopass, anything else resetpass >pass.
 * Any thread.
 */
void acl_set_requirepass(struct node *n, const char *pass);

/* Is there a user of this name? Any thread. */
bool acl_user_exists(struct node *n, const char *name, size_t len);

/* Is the default user on and nopass, so new connections need no AUTH
 * (and protected mode applies)? Any thread. */
bool acl_default_nopass(struct node *n);

/*
 * acl_auth - check a user name and password. user NULL is "default".
 * On success returns true and, when perm is not NULL, sets *perm to a new
 * reference to the user's permissions (release the old with
 * acl_perm_put). A failure is logged in ACL LOG (reason "auth") for the
 * client cl (may be NULL). Any thread.
 */
bool acl_auth(struct node *n, struct client *cl, const char *user, size_t ulen, const char *pass,
	      size_t plen, struct acl_perm **perm);

/* A new reference to the default user's permissions (a new client's),
 * and the table generation it is current at. */
struct acl_perm *acl_default_perm(struct node *n, uint64_t *gen);
/* Give cl the permissions p (a reference the client takes over) as of
 * generation gen, releasing its old ones; under its worker's clients_lock,
 * as CLIENT LIST on other workers reads the user's name. Owner worker. */
void acl_client_set(struct client *cl, struct acl_perm *p, uint64_t gen);
void acl_perm_put(struct acl_perm *p);

/* The client's permissions as of the table's current generation: false
 * when its user was deleted (the caller closes the client). Owner worker. */
bool acl_refresh(struct node *n, struct client *cl);

/* True when the client may run anything without a check: its snapshot is
 * current (invariant (2)) and grants everything. Owner worker. */
static inline bool acl_fast_ok(const uint64_t *gen, uint64_t cl_gen, const struct acl_perm *p)
{
	return cl_gen == ck_pr_load_64((uint64_t *)gen) && p->all;
}

/*
 * acl_check - may p run command d (resolved to its subcommand) with these
 * arguments? Returns ACL_OK or why not; *pos is then the index in argv of
 * the key or channel refused (0 for the command). Pure.
 */
enum acl_deny acl_check(const struct acl_perm *p, const struct cmd_def *d, int argc,
			const struct resp_arg *argv, int *pos);

/*
 * acl_refuse - dispatch's check (after acl_fast_ok failed): refresh the
 * client's snapshot, check, and on a refusal write Redis's NOPERM error to
 * out, add an ACL LOG entry and return true. A client whose user was
 * deleted is marked to close, and true is returned with no reply. Owner
 * worker.
 */
bool acl_refuse(struct worker *w, struct client *cl, struct resp_w *out, const struct cmd_def *d,
		int argc, const struct resp_arg *argv, enum acl_ctx ctx);

/*
 * acl_exec_refuse - EXEC's check of a queued command, as Redis 7.0 makes
 * it when the rules changed since it was queued: on a refusal write
 * Redis's "NOPERM ACLs rules changed ..." error as the command's reply,
 * log it (context "multi") when log is set, and return true. Owner worker.
 */
bool acl_exec_refuse(struct worker *w, struct client *cl, struct resp_w *out,
		     const struct cmd_def *d, int argc, const struct resp_arg *argv, bool log);

/*
 * acl_script_refuse - redis.call's check: on a refusal write the script
 * form of the error ("ERR The user executing the script can't ...") to
 * out, log it with context "lua" and return true. cl may be NULL (no
 * client: nothing is checked). Owner worker.
 */
bool acl_script_refuse(struct worker *w, struct client *cl, struct resp_w *out,
		       const struct cmd_def *d, int argc, const struct resp_arg *argv);

/* ACL LOG: add a refusal. object is the command's full name, the key or
 * the channel; for reason "auth" the command ("AUTH"). Any thread. */
void acl_log_add(struct node *n, struct client *cl, const char *reason, enum acl_ctx ctx,
		 const char *object, size_t olen, const char *user, size_t ulen);

#endif
