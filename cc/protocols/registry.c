/*
 * registry.c: the protocol table that `CONFIG SET cc` looks names up in.
 * A new protocol is one file in cc/protocols/ and one row here. A row with
 * an `id` is a variant of a name (nowait's shared-lock mode): CONFIG SET cc
 * finds it through cc_protocol_resolve, a cluster switch message names it
 * by id.
 */
#include <stddef.h>
#include <strings.h>

#include "cc/cc.h"

static const struct cc_protocol *const protocols[] = {
	&cc_nowait,
	&cc_nowait_shared,
	&cc_waitdie,
	&cc_woundwait,
	&cc_timestamp,
	&cc_mvcc,
	&cc_silo,
	&cc_occ,
	&cc_sundial,
	&cc_cicada,
	&cc_maat,
	&cc_calvin,
	&cc_none,
	NULL,
};
static_assert(sizeof(protocols) / sizeof(protocols[0]) <= CC_MAX_PROTOCOLS + 1,
	      "per-protocol counters have room for every protocol");

const struct cc_protocol *cc_protocol_find(const char *name)
{
	for (int i = 0; protocols[i]; i++)
		if (strcasecmp(cc_protocol_id(protocols[i]), name) == 0)
			return protocols[i];
	return NULL;
}

const struct cc_protocol *cc_protocol_resolve(const char *name, bool shared_locks)
{
	const struct cc_protocol *p = cc_protocol_find(name);
	if (!p || !shared_locks || p->shared_locks)
		return p;
	/* The variant of the same name that takes shared locks, if any. */
	for (int i = 0; protocols[i]; i++)
		if (protocols[i]->shared_locks && strcasecmp(protocols[i]->name, p->name) == 0)
			return protocols[i];
	return p;
}

int cc_protocol_index(const struct cc_protocol *p)
{
	for (int i = 0; protocols[i]; i++)
		if (protocols[i] == p)
			return i;
	return 0;
}

const struct cc_protocol *const *cc_protocol_all(void) { return protocols; }
