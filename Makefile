# Thin wrapper over CMake; see README.md.
BUILD ?= build
TYPE  ?= Release
JOBS  ?= $(shell nproc)

.PHONY: all deps build run test bench check-serializable clean

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

bench: build
	@./bench/redis-compare.sh

clean:
	rm -rf $(BUILD)
