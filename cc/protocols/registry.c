/*
 * registry.c: the protocol table that `CONFIG SET cc` looks names up in.
 * A new protocol is one file in cc/protocols/ and one row here.
 */
#include <stddef.h>
#include <strings.h>

#include "cc/cc.h"

static const struct cc_protocol *const protocols[] = {
	&cc_nowait,
	&cc_silo,
	&cc_none,
	NULL,
};

const struct cc_protocol *cc_protocol_find(const char *name)
{
	for (int i = 0; protocols[i]; i++)
		if (strcasecmp(protocols[i]->name, name) == 0)
			return protocols[i];
	return NULL;
}

const struct cc_protocol *const *cc_protocol_all(void) { return protocols; }
