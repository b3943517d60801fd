#!/usr/bin/env bash
# Windowed Bloom filters against a plain filter of the same total capacity, through Redis
# (docs/BENCHMARKS.md, "Windowed filters"). One server with the test-clock module (so the
# windowed filter's slices are filled one by one without waiting for real time), two filters
# of CAPACITY items at 1%: `plain`, holding CAPACITY/2 items, and `win` (WINDOW of 4 slices,
# CAPACITY/8 items in each, then the clock moved to a fifth slice: every generation a lookup
# probes is live), so both hold the same items at half their planned load. Lookups go to
# them, adds to fresh COPYs (at most CAPACITY/4 new items each: neither grows a layer). The
# rate is the server's: `INFO commandstats` microseconds per call after redis-benchmark sends
# each workload (pipelined, so the client never makes the server wait), ROUNDS rounds, plain
# and windowed interleaved, medians. A measurement, never pass/fail.
#
# Usage: scripts/bench-window.sh [CAPACITY] [COMMANDS] [ROUNDS]   (defaults 1000000 50000 5)
# Needs: make test-clock-module, redis-server, redis-cli, redis-benchmark, python3, awk.
set -euo pipefail

CAPACITY=${1:-1000000}
COMMANDS=${2:-50000}
ROUNDS=${3:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODULE=${LAYERBLOOM_TEST_CLOCK_MODULE:-$ROOT/target/test-clock/liblayerbloom.so}
SERVER=${LAYERBLOOM_SERVER:-redis-server}
[ -f "$MODULE" ] || { echo "no $MODULE: run make test-clock-module" >&2; exit 1; }

DIR=$(mktemp -d)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$SERVER" --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" \
  --loadmodule "$MODULE" --logfile "$DIR/redis.log" --daemonize no &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DIR"' EXIT
cli() { redis-cli -p "$PORT" "$@"; }
for _ in $(seq 50); do cli PING >/dev/null 2>&1 && break; sleep 0.1; done

SLICE=1000000
cli BF.RESERVE plain 0.01 "$CAPACITY" >/dev/null
cli BF.RESERVE win 0.01 "$CAPACITY" WINDOW $((4 * SLICE)) SLICES 4 >/dev/null

# Items are redis-benchmark's __rand_int__ spelling (12 digits) so its probes hit them.
fill() { # key first last
  awk -v k="$1" -v a="$2" -v b="$3" 'BEGIN {
    for (i = a; i < b; i += 1000) {
      n = (b - i < 1000) ? b - i : 1000
      printf "*%d\r\n$7\r\nBF.MADD\r\n$%d\r\n%s\r\n", n + 2, length(k), k
      for (j = i; j < i + n; j++) printf "$17\r\nitem:%012d\r\n", j
    }
  }' | cli --pipe >/dev/null
}
HALF=$((CAPACITY / 2))
EIGHTH=$((CAPACITY / 8))
fill plain 0 "$HALF"
for s in 0 1 2 3; do
  fill win $((s * EIGHTH)) $(((s + 1) * EIGHTH))
  cli CONFIG SET bf.bf-test-clock-offset-ms $(((s + 1) * SLICE)) >/dev/null
done
# Move the windowed filter to its fifth slice (a write does; its item is not probed).
cli BF.ADD win head-slice >/dev/null

usec() { # command name -> usec_per_call since the last reset
  cli INFO commandstats | tr -d '\r' | awk -F'[=,]' -v c="cmdstat_$1:calls" '$1 == c { print $6 }'
}
bench() { # commands range key command args...
  local n=$1 range=$2 key=$3; shift 3
  cli CONFIG RESETSTAT >/dev/null
  redis-benchmark -p "$PORT" -n "$n" -r "$range" -P 32 -c 4 -q "$1" "$key" "${@:2}" >/dev/null
  usec "$(echo "$1" | tr 'A-Z' 'a-z')"
}
hundred() { local i; for i in $(seq 100); do printf '%s ' "$1:__rand_int__"; done; }

declare -A RESULT
WORKLOADS=("exists-present" "exists-absent" "mexists-100" "add-new" "madd-100")
for r in $(seq "$ROUNDS"); do
  for key in plain win; do
    RESULT[$key,exists-present,$r]=$(bench "$COMMANDS" "$HALF" $key BF.EXISTS item:__rand_int__)
    RESULT[$key,exists-absent,$r]=$(bench "$COMMANDS" "$CAPACITY" $key BF.EXISTS miss:__rand_int__)
    # shellcheck disable=SC2046
    RESULT[$key,mexists-100,$r]=$(bench $((COMMANDS / 10)) "$HALF" $key BF.MEXISTS $(hundred item))
    cli COPY $key $key-copy >/dev/null
    RESULT[$key,add-new,$r]=$(bench "$COMMANDS" 1000000000 $key-copy BF.ADD "new:__rand_int__")
    cli DEL $key-copy >/dev/null
    cli COPY $key $key-copy >/dev/null
    # shellcheck disable=SC2046
    RESULT[$key,madd-100,$r]=$(bench $((COMMANDS / 20)) 1000000000 $key-copy BF.MADD $(hundred new))
    cli DEL $key-copy >/dev/null
  done
done
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "capacity $CAPACITY at 0.01, $COMMANDS single-item commands per workload (a tenth of MEXISTS, a twentieth of MADD, 100 items each), $ROUNDS rounds; server microseconds per call, medians"
printf '| %-16s | %10s | %10s | %6s |\n' workload plain windowed ratio
printf '|---|---|---|---|\n'
for w in "${WORKLOADS[@]}"; do
  p=$(for r in $(seq "$ROUNDS"); do echo "${RESULT[plain,$w,$r]}"; done | median)
  v=$(for r in $(seq "$ROUNDS"); do echo "${RESULT[win,$w,$r]}"; done | median)
  printf '| %-16s | %10s | %10s | %6s |\n' "$w" "$p" "$v" "$(awk -v a="$p" -v b="$v" 'BEGIN { printf "%.2f", b / a }')"
done
cli BF.MADD win head-1 head-2 >/dev/null
for key in plain win; do
  bytes=$(cli MEMORY USAGE $key)
  echo "$key: MEMORY USAGE $bytes bytes ($(awk -v b="$bytes" -v c="$CAPACITY" 'BEGIN { printf "%.2f", b / c }') per item of capacity), BF.CARD $(cli BF.CARD $key), layers $(cli BF.INFO $key FILTERS | tail -1)"
done
