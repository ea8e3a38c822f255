/*
 * declare.c: a transaction's key set from the command table (declare.h).
 */
#include "server/declare.h"

#include <stdlib.h>
#include <string.h>

#include "server/command.h"

void srv_decl_init(struct srv_decl *d)
{
	d->keys = d->stack;
	d->n = 0;
	d->cap = SRV_DECL_STACK;
	d->oom = false;
}

void srv_decl_free(struct srv_decl *d)
{
	if (d->keys != d->stack)
		free(d->keys);
	srv_decl_init(d);
}

void srv_decl_key(struct srv_decl *d, const char *p, size_t len, uint8_t access)
{
	if (d->n == d->cap) {
		int cap = d->cap * 2;
		struct cc_key *k = d->keys == d->stack ? malloc((size_t)cap * sizeof(*k))
						       : realloc(d->keys, (size_t)cap * sizeof(*k));
		if (!k) {
			d->oom = true;
			return;
		}
		if (d->keys == d->stack)
			memcpy(k, d->stack, sizeof(d->stack));
		d->keys = k;
		d->cap = cap;
	}
	d->keys[d->n++] = (struct cc_key){ .p = p, .len = (uint32_t)len, .access = access };
}

static uint8_t access_of(const struct cmd_def *def, const char *flags, int argc)
{
	const char *f = flags ? flags : "";
	if (strncmp(f, "RO", 2) == 0)
		return CC_KEY_READ;
	if (strncmp(f, "OW", 2) == 0)
		return CC_KEY_WRITE;
	if (strstr(f, "variable_flags") && argc == def->first_key + 2)
		return CC_KEY_WRITE; /* SET key value: no option reads the key */
	return CC_KEY_READ | CC_KEY_WRITE;
}

void srv_decl_command(struct srv_decl *d, const struct cmd_def *def, int argc,
		      const struct resp_arg *argv)
{
	if (def && def->getkeys) {
		int stack[SRV_DECL_STACK];
		int *idx = argc <= SRV_DECL_STACK ? stack : malloc((size_t)argc * sizeof(int));
		if (!idx) {
			d->oom = true;
			return;
		}
		int n = def->getkeys(argc, argv, idx, argc);
		for (int i = 0; i < n; i++)
			srv_decl_key(d, argv[idx[i]].p, argv[idx[i]].len,
				     access_of(def, cmd_key_flags(def, argc, argv, idx[i]), argc));
		if (idx != stack)
			free(idx);
		return;
	}
	if (!def || def->first_key <= 0 || argc <= def->first_key)
		return;
	int last = def->last_key < 0 ? argc + def->last_key : def->last_key;
	if (last >= argc)
		last = argc - 1;
	int step = def->key_step > 0 ? def->key_step : 1;
	for (int i = def->first_key; i <= last; i += step)
		srv_decl_key(d, argv[i].p, argv[i].len,
			     access_of(def, cmd_key_flags(def, argc, argv, i), argc));
}
