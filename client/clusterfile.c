/*
 * clusterfile.c: node addresses from a cluster configuration file.
 *
 * The file format belongs to the server (conf/cluster-*.conf); a client
 * only needs where to connect, so it reads node lines and skips all
 * else. rckv_cluster_parse_line() is the one function that knows the
 * syntax of a node line:
 *
 *   cluster-node <id> <host>:<port> [<fabric-address> [<raft-address>]]
 *
 * (conf/cluster-3.conf's keyword; `node` is accepted as well.)
 * Blank lines and '#' comments are skipped; so is a trailing comment.
 */
#include "client/rckv.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_WORDS 8

/* Split s (modified in place) into blank-separated words, up to max;
 * returns the count, or max + 1 if there were more. */
static int split_words(char *s, char **w, int max)
{
	int n = 0;

	for (;;) {
		while (*s && isspace((unsigned char)*s))
			s++;
		if (!*s || *s == '#')
			return n;
		if (n == max)
			return max + 1;
		w[n++] = s;
		while (*s && !isspace((unsigned char)*s))
			s++;
		if (*s)
			*s++ = '\0';
	}
}

static int parse_port(const char *s, int *port)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > 65535)
		return -1;
	*port = (int)v;
	return 0;
}

int rckv_cluster_parse_line(const char *line, struct rckv_node *out, char *err, size_t errlen)
{
	char buf[512], *w[LINE_MAX_WORDS], *colon, *host, *end;
	int n;
	long id;

	if (strlen(line) >= sizeof(buf)) {
		snprintf(err, errlen, "line longer than %zu bytes", sizeof(buf) - 1);
		return RCKV_EPARSE;
	}
	strcpy(buf, line);
	n = split_words(buf, w, LINE_MAX_WORDS);
	if (n == 0 || (strcmp(w[0], "cluster-node") != 0 && strcmp(w[0], "node") != 0))
		return 0;
	if (n < 3 || n > 5) {
		snprintf(err, errlen,
			 "expected '%s <id> <host>:<port> [<fabric-address> [<raft-address>]]'", w[0]);
		return RCKV_EPARSE;
	}
	memset(out, 0, sizeof(*out));
	errno = 0;
	id = strtol(w[1], &end, 10);
	if (errno || end == w[1] || *end || id < 0 || id > 1000000) {
		snprintf(err, errlen, "bad node id '%s'", w[1]);
		return RCKV_EPARSE;
	}
	out->id = (int)id;
	colon = strrchr(w[2], ':');
	if (!colon || colon == w[2] || parse_port(colon + 1, &out->port) != 0) {
		snprintf(err, errlen, "bad address '%s' (expected host:port)", w[2]);
		return RCKV_EPARSE;
	}
	*colon = '\0';
	host = w[2];
	if (host[0] == '[') { /* [v6addr]:port */
		size_t hl = strlen(host);
		if (hl < 3 || host[hl - 1] != ']') {
			snprintf(err, errlen, "bad address '%s' (expected [host]:port)", w[2]);
			return RCKV_EPARSE;
		}
		host[hl - 1] = '\0';
		host++;
	}
	if (strlen(host) >= sizeof(out->host)) {
		snprintf(err, errlen, "host name '%s' too long", host);
		return RCKV_EPARSE;
	}
	strcpy(out->host, host);
	if (n >= 4) {
		if (strlen(w[3]) >= sizeof(out->fabric)) {
			snprintf(err, errlen, "fabric address '%s' too long", w[3]);
			return RCKV_EPARSE;
		}
		strcpy(out->fabric, w[3]);
	}
	return 1;
}

int rckv_cluster_file_read(const char *path, struct rckv_cluster_file *out, char *err,
			   size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[1024], why[256];
	int lineno = 0, rc = 0;

	memset(out, 0, sizeof(*out));
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		struct rckv_node node;
		int r;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line longer than %zu bytes", path, lineno,
				 sizeof(line) - 2);
			rc = RCKV_EPARSE;
			goto out;
		}
		line[strcspn(line, "\r\n")] = '\0';
		r = rckv_cluster_parse_line(line, &node, why, sizeof(why));
		if (r < 0) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			rc = r;
			goto out;
		}
		if (r == 0)
			continue;
		if (out->n == RCKV_MAX_NODES) {
			snprintf(err, errlen, "%s:%d: more than %d nodes", path, lineno,
				 RCKV_MAX_NODES);
			rc = RCKV_ERANGE;
			goto out;
		}
		for (int i = 0; i < out->n; i++) {
			if (out->nodes[i].id == node.id) {
				snprintf(err, errlen, "%s:%d: node id %d listed twice", path, lineno,
					 node.id);
				rc = RCKV_ERANGE;
				goto out;
			}
		}
		out->nodes[out->n++] = node;
	}
	if (ferror(f)) {
		rc = -EIO;
		snprintf(err, errlen, "%s: read error", path);
	} else if (out->n == 0) {
		rc = RCKV_EPARSE;
		snprintf(err, errlen, "%s: no 'cluster-node <id> <host>:<port> <fabric-address>' line",
			 path);
	}
out:
	fclose(f);
	return rc;
}
