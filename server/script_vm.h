/*
 * script_vm: one Lua 5.1 interpreter that runs EVAL scripts, with Redis's
 * sandbox and reply conversions (server/script_vm.c). The script commands
 * (server/script.c) keep a pool of them per worker and lend one to each
 * script for the length of one run, so that a script that waits for the
 * fabric (its coroutine yields inside redis.call) never shares its Lua
 * state with another: each VM is used by one coroutine at a time, on its
 * worker's thread only.
 *
 * The sandbox is Redis 7's:
 *  - the base, table, string and math libraries, `bit` and `cjson` (encode,
 *    decode and null: its settings would outlive a script); no os, io,
 *    package, debug, print, dofile, loadfile, getfenv or setfenv;
 *  - the globals are read-only ("Attempt to modify a readonly table"), and
 *    reading an absent one is an error ("Script attempted to access
 *    nonexistent global variable 'x'"); so are the library tables;
 *  - the `redis` table: call, pcall, error_reply, status_reply, sha1hex,
 *    log, setresp, set_repl, replicate_commands, breakpoint, debug and
 *    their constants;
 *  - `pcall` returns the message of a Redis error (a table with an `err`
 *    field) as a string, as Redis 7 does;
 *  - no precompiled chunks (EVAL, loadstring, load): Lua 5.1 runs bytecode
 *    unverified.
 * A script's values are read raw (no metamethods) once it returned, since
 * that runs outside its pcall and its time limit.
 */
#ifndef RCKV_SRV_SCRIPT_VM_H
#define RCKV_SRV_SCRIPT_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resp/resp.h"

struct script_vm;

/*
 * What the VM asks of the script commands while a script runs (server/
 * script.c implements them on the running transaction).
 *  - call: run one Redis command (argv[0] its name) for redis.call or
 *    redis.pcall and write its RESP2 reply to out. Returns 0, or
 *    SCRIPT_STOP when the script must stop (a CC abort, a kill, its time
 *    limit): the VM then raises an error that ends the script even
 *    through pcall, and the caller learns why from its own state.
 *  - tick: called every SCRIPT_TICK_INSNS Lua instructions; returns
 *    SCRIPT_STOP as above (time limit, SCRIPT KILL), else 0. May yield the
 *    coroutine so that other clients of the worker are served.
 *  - log: redis.log at a Redis level (0 debug .. 3 warning).
 */
#define SCRIPT_STOP 1
#define SCRIPT_TICK_INSNS 100000
struct script_host {
	int (*call)(void *arg, int argc, struct resp_arg *argv, struct resp_w *out);
	int (*tick)(void *arg);
	void (*log)(void *arg, int level, const char *msg, size_t len);
	void *arg;
};

/* A new VM with the sandbox; NULL if out of memory. */
struct script_vm *svm_open(void);
void svm_close(struct script_vm *vm);

/* Bytes the VM's heap holds now. */
size_t svm_used(const struct script_vm *vm);

/* The generation of the script cache the VM's compiled functions belong
 * to; svm_forget drops them all and sets a new generation (SCRIPT FLUSH). */
uint64_t svm_gen(const struct script_vm *vm);
void svm_forget(struct script_vm *vm, uint64_t gen);

/*
 * svm_compile - compile body as the function named sha (40 hex digits)
 * unless it is compiled already. A shebang line ("#!lua ...") is
 * compiled as a comment, so line numbers stay those of the body. On a
 * syntax error, writes Redis's message to err ("Error compiling script
 * (new function): user_script:1: ...") and returns -1.
 */
int svm_compile(struct script_vm *vm, const char *sha, const char *body, size_t len,
		char *err, size_t errlen);
bool svm_compiled(struct script_vm *vm, const char *sha);

/*
 * svm_run - run the compiled function sha with KEYS and ARGV, and write its
 * reply to out: the return value converted as Redis converts it, or on an
 * error Redis's error reply ("<err> script: <sha>, on @user_script:<line>.").
 * While it runs, the VM's heap may grow by at most mem_limit bytes past
 * what it held before (past it, the script fails with "not enough
 * memory"). Returns SVM_OK when the script returned normally (its value
 * may still be an error reply, as redis.error_reply's), SVM_ERROR when it
 * raised an error (its writes must be undone), SVM_STOPPED when
 * host->call or host->tick stopped it (nothing is written to out: the
 * caller knows why and replies itself).
 */
enum { SVM_OK = 0, SVM_ERROR = 1, SVM_STOPPED = 2 };
int svm_run(struct script_vm *vm, const char *sha, const struct resp_arg *keys, int nkeys,
	    const struct resp_arg *args, int nargs, size_t mem_limit,
	    const struct script_host *host, struct resp_w *out);

#endif
