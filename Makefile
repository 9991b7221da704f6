# Top-level driver: `make` builds everything into build/ (the CLI is
# build/stepscope); `make test` runs every test; `make asan` builds and tests
# under AddressSanitizer + UBSan in build-asan/ (all but the timing
# measurements: the real-DDP tests, whose native parts the Python tests
# cover under the sanitizers, and guard's verdicts over histories of real
# runs, whose code cmd_guard_test and query_history_test cover, and the virtual
# cluster's own tests, which run no stepscope code, and the multi-node
# runs' real DDP jobs, timed by heartbeats and join timeouts, whose link
# protocol, authentication and clock estimate the unit tests cover (node
# aggregation's too: node_partial_test, agent_fold_test, node_merge_test),
# and the
# stacks' 2-second answer on one node and across two, whose collector and
# assembly stack_collect_test and remote_stacks_test cover, and
# the injected faults' timings);
# `make demo` runs the demo.
BUILD ?= build
GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
JOBS ?= 2

.PHONY: all deps test unit asan fuzz demo bench bench-agents bench-torch bench-accuracy clean install

all: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo

deps:
	scripts/install-deps.sh

# Installs stepscope under PREFIX (default /usr/local): bin/stepscope, the
# recorder's lib/ and include/, and the Python package in
# lib/stepscope/python (where `stepscope run --auto` finds it), e.g.
# `make install PREFIX=$$HOME/.local`.
PREFIX ?= /usr/local
install: all
	cmake --install $(BUILD) --prefix $(PREFIX)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

unit: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -R '^unit\.'

# The sanitizer build runs every test but the end-to-end files that are too
# slow under it or whose Python ranks do not get the ASan runtime preloaded
# (test_ddp's python_cmd shows how): those run in `make test` only.
asan:
	cmake -S . -B build-asan $(GEN) -DCMAKE_BUILD_TYPE=Debug -DSTEPSCOPE_SANITIZE=ON
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS) -E '^e2e\.test_(ddp|guard|dashboard_history|netns_infra|hang|multinode|multinode_aggregate|stacks|inject|profile|stacks_multinode|recent_multinode|restarts|cli|dashboard_headline|docs_examples|empty_runs|interrupt)$$'

fuzz:
	CC=clang cmake -S . -B build-fuzz $(GEN) -DCMAKE_BUILD_TYPE=Debug -DSTEPSCOPE_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS) --target fuzz_wire fuzz_link
	mkdir -p build-fuzz/corpus build-fuzz/corpus_link
	build-fuzz/fuzz/fuzz_wire -max_total_time=$${FUZZ_SECONDS:-60} build-fuzz/corpus fuzz/corpus
	build-fuzz/fuzz/fuzz_link -max_total_time=$${FUZZ_SECONDS:-60} build-fuzz/corpus_link fuzz/corpus_link

demo: all
	scripts/demo.sh

bench: all
	scripts/bench.sh

# The multi-node controller under 64 agents x 64 ranks at 10 steps/s over
# TCP for a minute (docs/performance.md, "Many nodes"); BENCH_ARGS overrides,
# e.g. BENCH_ARGS="--agents 128 --ranks 128 --rate 1 --seconds 60".
bench-agents: all
	$(BUILD)/bench/bench_agents $(or $(BENCH_ARGS),--agents 64 --ranks 64 --rate 10 --seconds 60 --aggregate rank,node)

# `stepscope stacks` of 64 simulated agents x 64 ranks + node 0's 64 real
# ranks, 15 requests (docs/performance.md, "Every rank's stacks");
# BENCH_ARGS overrides, e.g. BENCH_ARGS="--reps 5 --silent 1".
.PHONY: bench-stacks-agents
bench-stacks-agents: all
	$(BUILD)/bench/bench_stacks_agents $(or $(BENCH_ARGS),--agents 64 --ranks 64 --reps 15)

# What stepscope costs a PyTorch DDP job (docs/performance.md); ~20 minutes.
bench-torch: all
	STEPSCOPE_BUILD=$(BUILD) /usr/bin/python3 bench/bench_torch_overhead.py $(BENCH_ARGS)

# Does stepscope name the right rank, phase and cause (docs/accuracy.md)?
# A scenario matrix on real DDP jobs; ~20 minutes.  BENCH_ARGS passes options,
# e.g. BENCH_ARGS="--only slow-backward,nice-19 --reps 1 --out accuracy.md".
bench-accuracy: all
	STEPSCOPE_BUILD=$(BUILD) /usr/bin/python3 bench/bench_accuracy.py $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
