/*
 * declare: a transaction's key set, as cc's executor takes it (cc/exec.h,
 * struct cc_txn): every key of every command, from the command table's
 * key positions, with the access its key spec declares (DESIGN.md
 * section 4). Built on the coroutine that runs the transaction.
 */
#ifndef RCKV_SRV_DECLARE_H
#define RCKV_SRV_DECLARE_H

#include "cc/exec.h"
#include "resp/resp.h"

struct cmd_def;

#define SRV_DECL_STACK 16

struct srv_decl {
	struct cc_key *keys;     /* stack, or malloc'd past SRV_DECL_STACK */
	int n, cap;
	bool oom;                /* a key could not be added: the rest are fetched
				    when the body reaches them */
	struct cc_key stack[SRV_DECL_STACK];
};

void srv_decl_init(struct srv_decl *d);
void srv_decl_free(struct srv_decl *d);

/*
 * srv_decl_command - add the keys of one request of def. The access
 * comes from the first word of the key's spec (cmd_key_flags: BITOP's
 * destination and sources differ): RO reads; OW writes without
 * reading; RW and RM read, then write. A spec whose flags vary with the
 * arguments ("variable_flags": SET) is a blind write in its plain form
 * (the key and the value alone), else read, then write. The keys point
 * into argv, which must outlive the transaction.
 */
void srv_decl_command(struct srv_decl *d, const struct cmd_def *def, int argc,
		      const struct resp_arg *argv);

/* Add one key with its access (CC_KEY_*): WATCHed keys are reads. */
void srv_decl_key(struct srv_decl *d, const char *p, size_t len, uint8_t access);

#endif
