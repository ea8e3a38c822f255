/*
 * bench/fabric: the fabric microbenchmark, `rckv-bench fabric`.
 */
#ifndef RCKV_BENCH_FABRIC_H
#define RCKV_BENCH_FABRIC_H

/*
 * bench_fabric_main - measure nanoseconds per one-sided operation (READ 64 B,
 * READ 1 KiB, CAS, FAA), one op per fab_exec and B ops per fab_exec, between
 * two nodes in this process: shm (the peer's region file mapped here) and
 * tcp (over loopback to the peer's NIC thread). Prints a table on stdout.
 * @argc, argv: the arguments after "rckv-bench", argv[0] being "fabric":
 *              [--backend shm|tcp] [--ops N] [--batch B] [--help].
 * Returns the exit status: 0, 1 if the fabric failed, 2 for a bad command
 * line. Main thread; starts and joins its own threads.
 */
int bench_fabric_main(int argc, char **argv);

#endif
