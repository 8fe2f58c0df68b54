# Thin wrapper over CMake. `make demo` and `make test` work on a fresh machine: they install the
# Debian packages pipetwin needs (scripts/install-deps.sh, fast when all are there), configure a
# Release build in build/, build, then run.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
PROFILES ?= ../shared/profiles/pipedream

.PHONY: all deps configure build demo test bench clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DPIPETWIN_PIPEDREAM_PROFILES=$(abspath $(PROFILES)) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) -- --no-print-directory

# The main job on the embedded default: plan VGG-16 (PipeDream's profile) on PipeDream's Cluster-A.
demo: build
	@bash scripts/demo.sh $(BUILD_DIR) $(PROFILES)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

bench: build
	@bash scripts/bench.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
