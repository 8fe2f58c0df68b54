# Thin wrapper over CMake. `make demo` and `make test` work on a fresh machine: they install the
# Debian packages pipetwin needs (scripts/install-deps.sh, fast when all are there), configure a
# Release build in build/, build, then run.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
PROFILES ?= ../shared/profiles/pipedream
SANITIZER_OPTIONS ?= detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1

.PHONY: all deps configure build demo test test-sanitize test-no-torch fuzz bench clean

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

# Every test, then every test again in a second build under AddressSanitizer + UndefinedBehaviorSanitizer,
# then the build without libtorch.
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory test-sanitize
	@$(MAKE) --no-print-directory test-no-torch

# Planning and simulation without libtorch (-DPIPETWIN_WITH_TORCH=OFF) in build-notorch/: it builds,
# plans, schedules and simulates, and a training command says it needs libtorch.
test-no-torch: deps
	@cmake -S . -B build-notorch -DCMAKE_BUILD_TYPE=Release -DPIPETWIN_WITH_TORCH=OFF -DPIPETWIN_BUILD_TESTS=OFF \
	  -DPIPETWIN_BUILD_BENCH=OFF -DPIPETWIN_PIPEDREAM_PROFILES=$(abspath $(PROFILES)) >/dev/null
	@cmake --build build-notorch -j $(JOBS) -- --no-print-directory
	@bash scripts/test-no-torch.sh build-notorch $(PROFILES)

# The unit tests built with -fsanitize=address,undefined in build-asan/; any finding fails its test.
# (The notebooks test runs only Python, so it is left to the first build.)
test-sanitize: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE=-O1 -DPIPETWIN_SANITIZE=ON \
	  -DPIPETWIN_BUILD_BENCH=OFF \
	  -DPIPETWIN_PIPEDREAM_PROFILES=$(abspath $(PROFILES)) >/dev/null
	@cmake --build build-asan -j $(JOBS) -- --no-print-directory
	@cd build-asan && ASAN_OPTIONS=$(SANITIZER_OPTIONS) UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -E '^notebooks$$'

# The readers' libFuzzer targets (clang, ASan + UBSan) in build-fuzz/, FUZZ_SECONDS (60) per reader.
fuzz: deps
	@bash scripts/fuzz.sh build-fuzz $(PROFILES)

bench: build
	@bash scripts/bench.sh $(BUILD_DIR)
	@/usr/bin/python3 bench/startup.py --build $(BUILD_DIR) --profiles $(PROFILES)

clean:
	rm -rf $(BUILD_DIR) build-asan build-fuzz build-notorch
