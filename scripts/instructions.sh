#!/usr/bin/env bash
# Instructions the server executes per command, counted by callgrind (valgrind): unlike times,
# the counts do not depend on what else a shared machine is doing (the filter core's repeat
# exactly; Redis's own vary by a few percent between runs with its timers and table state). A redis-server with the module runs
# under callgrind on a free loopback port; redis-benchmark sends each command 20000 times
# (pipelines of 64, one connection); the counters are zeroed before and dumped after each.
# A filter of 1e6 items at 0.1% (1.8 MB, no growth during the run): this counts the work of the commands, not memory stalls. The last
# column is the part spent in the filter core (functions of layerbloom_filter, with what is
# inlined into them: hashing, probing, adding); the rest of a BF command is Redis's command
# path and the module API calls around the filter.
#
# A second table counts per item the batch commands of 100 items (BF.MADD and BF.INSERT of new
# items, BF.MEXISTS of absent ones, 2000 commands each) on a filter of 1e7 items at 0.1% (20
# MB): the filter core's share and the rest (the glue and Redis). Here the core's share is the
# inclusive cost of its entry points (`ScalableFilter::add_many` / `contains_many` / `add` /
# `contains`): the std iterator code a batch lookup is compiled into carries no name of the
# crate, so the self cost of `layerbloom_filter::` functions would miss most of it.
#
#   scripts/instructions.sh [path/to/liblayerbloom.so]      (make bench-instructions)
set -euo pipefail
module=$(realpath "${1:-target/release/liblayerbloom.so}")
for tool in valgrind callgrind_control redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
while redis-cli -p "$port" ping >/dev/null 2>&1; do port=$((port + 1)); done
cleanup() { redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
(cd "$work" && valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
  --compress-strings=no --compress-pos=no \
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
  --loadmodule "$module" >"$work/server.log" 2>&1 &)
for _ in $(seq 120); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.5; done
cli() { redis-cli -p "$port" "$@" >/dev/null; }
pid=$(redis-cli -p "$port" info server | tr -d '\r' | sed -n 's/^process_id://p')
cli BF.RESERVE f 0.001 1000000
cli BF.ADD f item
cli BF.RESERVE g 0.001 10000000
cli SET k v
cli SETBIT s 100000 1
n=20000
range=100000
count() {
  callgrind_control -z "$pid" >/dev/null 2>&1
  redis-benchmark -p "$port" -n "$n" -P 64 -c 1 -r "$range" "$@" >/dev/null
  callgrind_control -d "$pid" >/dev/null 2>&1
  local dump total core
  dump=$(ls -t "$work"/cg.out.* | head -1)
  total=$(grep -m1 '^summary:' "$dump" | cut -d' ' -f2)
  core=$(callgrind_annotate --auto=no --inclusive=no --threshold=100 "$dump" 2>/dev/null |
    awk '/layerbloom_filter::/ { gsub(",", "", $1); sum += $1 } END { print sum + 0 }')
  local entry
  # The inclusive cost of the entry points from the raw dump (uncompressed names): within a
  # function's block every cost line counts, its own instructions and, after each `calls=`
  # line, the callee's inclusive cost.
  entry=$(awk '/^fn=/ { on = ($0 ~ /ScalableFilter::(add_many|contains_many|add|contains)$/); next }
    on && /^[0-9]/ { sum += $2 } END { print sum + 0 }' "$dump")
  echo "$(( total / n )) $(( core / n )) $(( entry / n ))"
}
read -r ping _ _ < <(count PING)
echo "| command | instructions per command | vs PING | of which in the filter core |"
echo "|---|---|---|---|"
row() {
  local c core
  read -r c core _ < <(count "$@")
  echo "| $* | $c | $(awk -v a="$c" -v b="$ping" 'BEGIN{printf "%.2f", a/b}') | $core |"
}
echo "| PING | $ping | 1.00 | 0 |"
row EXISTS k
row GETBIT s 1000
row SETBIT s 1000 1
row BF.EXISTS f item
row BF.EXISTS f absent
row BF.ADD f __rand_int__
row BF.MEXISTS f item item item item item item item item item item

# 100 arguments: new items (random numbers of 12 digits from a range of 2^31: a repeat or a
# false positive among each 200,000 is rare) and absent ones (prefixed, as no item is).
n=2000
range=100000000000
new=() absent=()
for _ in $(seq 100); do new+=(__rand_int__); absent+=(a:__rand_int__); done
echo
echo "| 100 items per command | instructions per item | in the filter core | rest (glue + Redis) |"
echo "|---|---|---|---|"
per_item() {
  local label=$1 c core
  shift
  read -r c _ core < <(count "$@")
  echo "| $label | $(( c / 100 )) | $(( core / 100 )) | $(( (c - core) / 100 )) |"
}
per_item "BF.MADD, new items" BF.MADD g "${new[@]}"
per_item "BF.INSERT, new items" BF.INSERT g ITEMS "${new[@]}"
per_item "BF.MEXISTS, absent items" BF.MEXISTS g "${absent[@]}"
