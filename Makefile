# Thin wrapper over CMake; see README.md.
BUILD ?= build
TYPE  ?= Release
JOBS  ?= $(shell nproc)

.PHONY: all deps build run test bench check-serializable check-failover clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@./scripts/run.sh

test: build
	@cd $(BUILD) && ctest --output-on-failure --timeout 600 -j 1

# The long serializability check: 400 runs on all three topologies, 2 h 28
# min of load plus each run's start and check (README.md "Checking
# serializability"). Extra options for tests/checker/run.py in CHECK_ARGS:
# CHECK_ARGS=--quick cuts it to 218 shorter runs, 16 min of load, still
# every protocol on every topology;
# CHECK_ARGS="--duration 120" makes each run longer. Paths are absolute:
# run.py starts its servers in temporary directories.
check-serializable: build
	@RCKV_SERVER=$(abspath $(BUILD))/rckv-server /usr/bin/python3 tests/checker/run.py --long \
		--out $(abspath $(BUILD))/checker-histories $(CHECK_ARGS)

# Failover under load, the issue's ten kills -9 per cell (make test runs
# three): the bank with replicas 2 on shm3 (silo) and tcp3 (mvcc), a
# random node killed every 7 s and waited out each time, about 3 minutes.
check-failover: build
	@RCKV_SERVER=$(abspath $(BUILD))/rckv-server RCKV_BUILD=$(abspath $(BUILD)) \
		RCKV_SOURCE_DIR=$(CURDIR) RCKV_FAILOVERS=10 /usr/bin/python3 -m pytest -q \
		-p no:cacheprovider -k failover_every tests/checker/test_replicas.py

# redis-benchmark's GET/SET/INCR/MSET table, then rckv-bench's YCSB runs
# against redis-server and the sweep charts, then every protocol on a
# 3-node shm cluster (bench/protocols.sh), then RCC's stage breakdown and
# every one-sided/RPC hybrid of four protocols (bench/stages.sh, about ten
# minutes), then persistence power against
# Redis's append-only file, ycsb-t under power and recovery with a long
# write-ahead log (bench/power.sh, about 8 minutes); replicas 1, 2 and 3
# (bench/replicas.sh, about 40 minutes), and the failover time under kill -9
# with replicas 2 (bench/failover.sh, about 5 minutes), and the OLTP
# workloads SmallBank, TPC-C (1 and 3 warehouses) and TATP as Lua scripts,
# rckv against redis-server on one node and every protocol on a 3-node shm
# cluster (bench/oltp.sh, a few minutes); calvin against its coroutines on
# shm and tcp (bench/calvin.sh, about 5 minutes); and memory: 200,000 values
# of 1 KB and of 100 bytes in rckv and in redis-server, RSS side by side
# (bench/memory.py, under a minute); all under bench/results/.
bench: build
	@RCKV_SERVER=$(abspath $(BUILD))/rckv-server /usr/bin/python3 bench/memory.py
	@./bench/redis-compare.sh
	@./bench/sweep.sh
	@RCKV_SERVER=$(BUILD)/rckv-server RCKV_BENCH=$(BUILD)/rckv-bench ./bench/protocols.sh
	@RCKV_SERVER=$(BUILD)/rckv-server RCKV_BENCH=$(BUILD)/rckv-bench ./bench/stages.sh
	@RCKV_SERVER=$(BUILD)/rckv-server RCKV_BENCH=$(BUILD)/rckv-bench ./bench/power.sh
	@RCKV_SERVER=$(BUILD)/rckv-server RCKV_BENCH=$(BUILD)/rckv-bench ./bench/replicas.sh
	@RCKV_SERVER=$(abspath $(BUILD))/rckv-server ./bench/failover.sh
	@RCKV_SERVER=$(BUILD)/rckv-server RCKV_BENCH=$(BUILD)/rckv-bench ./bench/oltp.sh
	@RCKV_SERVER=$(BUILD)/rckv-server RCKV_BENCH=$(BUILD)/rckv-bench ./bench/calvin.sh

clean:
	rm -rf $(BUILD)
