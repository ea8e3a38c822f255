# Thin wrapper over CMake; see README.md.
BUILD ?= build
TYPE  ?= Release
JOBS  ?= $(shell nproc)

.PHONY: all deps build run test fuzz sanitize tsan bench check-serializable check-failover check-long clean

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

# libFuzzer harnesses (tests/fuzz/): a clang build with ASan and UBSan
# (UBSan fatal) in $(FUZZ_BUILD), then each harness for FUZZ_SECONDS, one
# after the other, from the seeds in tests/fuzz/corpus/; prints each one's
# executions and coverage and fails on a crash (scripts/fuzz.sh).
# FUZZERS="fuzz_resp fuzz_config" runs only those.
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build-fuzz
FUZZERS ?=
fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release \
		-DRCKV_FUZZ=ON -DRCKV_ASAN=ON -DRCKV_UBSAN=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers
	@FUZZ_SECONDS=$(FUZZ_SECONDS) ./scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZERS)

# ASan+UBSan: every unit test, then a short integration subset against the
# sanitized server (a report in a server's log fails its test: rckvtest.py).
# Suppressions, each with its reason, in tests/sanitizers/.
SAN_BUILD ?= build-san
SAN_PYTESTS ?= tests/integration/test_errors.py tests/integration/test_multi.py \
	tests/integration/test_badinput.py tests/integration/test_pipeline_groups.py \
	tests/integration/test_scripting.py tests/integration/test_resources.py \
	tests/integration/test_restart.py tests/integration/test_cluster.py
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:suppressions=$(CURDIR)/tests/sanitizers/asan.supp \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$(CURDIR)/tests/sanitizers/ubsan.supp
sanitize: deps
	@cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DRCKV_ASAN=ON -DRCKV_UBSAN=ON >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)
	@cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure --timeout 600 -j 1 -R '^(unit|layers)\.'
	@$(SAN_ENV) RCKV_SERVER=$(abspath $(SAN_BUILD))/rckv-server RCKV_BUILD=$(abspath $(SAN_BUILD)) \
		RCKV_SOURCE_DIR=$(CURDIR) /usr/bin/python3 -m pytest -q -p no:cacheprovider $(SAN_PYTESTS)

# ThreadSanitizer: the cc and fabric unit tests (tests/unit/test_cc.c,
# test_fabric.c), suppressions with reasons in tests/sanitizers/tsan.supp.
TSAN_BUILD ?= build-tsan
tsan: deps
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DRCKV_TSAN=ON >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target test_cc test_fabric
	@cd $(TSAN_BUILD) && for t in test_cc test_fabric; do \
		echo "tsan: $$t"; \
		TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/sanitizers/tsan.supp \
			./$$t || exit 1; done

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

# The variants `make test` leaves out to stay within its time (tests marked
# `long`: the 100,000-SET pipeline under persistence process and
# power-everysec, which `make test` runs under power), about a minute.
check-long: build
	@RCKV_SERVER=$(abspath $(BUILD))/rckv-server RCKV_BUILD=$(abspath $(BUILD)) \
		RCKV_SOURCE_DIR=$(CURDIR) RCKV_LONG=1 /usr/bin/python3 -m pytest -q \
		-p no:cacheprovider -m long tests/integration

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
