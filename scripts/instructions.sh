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
# A third table puts the cuckoo commands (CF.EXISTS, CF.ADD, CF.DEL; CF.INSERT and CF.MEXISTS
# of 100 items) beside RedisBloom 2.8.2's own module, counted the same way in a server of the
# same binary: a filter reserved for 4e6 items (RedisBloom's defaults: bucket size 2, 4 MiB of
# slots, one sub-filter that never grows in the run), holding 400,000 items first (the
# numbers redis-benchmark draws for single commands, each added twice, so that a delete of a
# number drawn twice still finds a copy). Each command's instructions are split three ways:
# Redis's own path (parsing the command, looking it up, sending replies: the same code for
# both modules, and what moves between runs, with the server's timers), the module's command
# (the inclusive cost of Redis's calls into `RedisModuleCommandDispatcher`), and within it the
# core: the inclusive cost of the calls from outside the core into its entry points
# (layerbloom: `CuckooFilter::add`, `delete`, `contains`, `insert_many(_within)`, `contains_many`, and
# the same of `AnyFilter`, which the handlers call and which inlines the single ones;
# RedisBloom: `CuckooFilter_Insert`, `_Check`, `_Delete`, `_InsertUnique` and its item hash,
# `MurmurHash64A_Bloom`, which its command handlers call), so hashing counts as core on both
# sides; the glue is the rest of the module's command.
#
#   scripts/instructions.sh [liblayerbloom.so] [redisbloom.so]     (make bench-instructions)
#
# The second module defaults to $REDISBLOOM, else target/servers/redis-7.4.1/redisbloom.so;
# without it the cuckoo table has layerbloom's column only. SECTIONS="bf", "split" or "cf" runs
# one part.
set -euo pipefail
module=$(realpath "${1:-target/release/liblayerbloom.so}")
peer=${2:-${REDISBLOOM:-target/servers/redis-7.4.1/redisbloom.so}}
peer=$(realpath "$peer" 2>/dev/null || true)
[ -f "$peer" ] || peer=
sections=${SECTIONS:-bf split cf}
# The split table needs the names of inlined functions: SPLIT_MODULE, the same code built with
# full debug info (`make bench-instructions` builds it); release builds keep line tables only.
split_module=$(realpath "${SPLIT_MODULE:-$module}")
for tool in valgrind callgrind_control callgrind_annotate redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }
done
work=$(mktemp -d)
port= pid= tag=
stop_server() {
  [ -n "$port" ] || return 0
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  for _ in $(seq 120); do redis-cli -p "$port" ping >/dev/null 2>&1 || break; sleep 0.5; done
  port=
}
# KEEP_DUMPS=dir keeps every dump there (for callgrind_annotate), named after its command.
cleanup() {
  stop_server
  if [ -n "${KEEP_DUMPS:-}" ]; then mkdir -p "$KEEP_DUMPS" && cp "$work"/cg-*.out.* "$work"/dumps.txt "$work"/server-*.log "$KEEP_DUMPS"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# A redis-server under callgrind with module $1, its dumps named after $2; any further
# arguments go to callgrind.
start_server() {
  tag=$2
  local module_path=$1
  shift 2
  port=$((20000 + RANDOM % 20000))
  while redis-cli -p "$port" ping >/dev/null 2>&1; do port=$((port + 1)); done
  (cd "$work" && valgrind --tool=callgrind --callgrind-out-file="$work/cg-$tag.out" \
    --compress-strings=no --compress-pos=no "$@" \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
    --loadmodule "$module_path" >"$work/server-$tag.log" 2>&1 &)
  for _ in $(seq 120); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.5; done
  pid=$(redis-cli -p "$port" info server | tr -d '\r' | sed -n 's/^process_id://p')
}
cli() { redis-cli -p "$port" "$@" >/dev/null; }
# Runs one redis-benchmark stream with the counters zeroed before and dumped after; prints the
# dump's path and its instructions per command.
measure() {
  callgrind_control -z "$pid" >/dev/null 2>&1
  redis-benchmark -p "$port" -n "$n" -P 64 -c 1 -r "$range" "$@" >/dev/null
  callgrind_control -d "$pid" >/dev/null 2>&1
  local dump
  dump=$(ls -t "$work"/cg-"$tag".out.* | head -1)
  if [ -n "${KEEP_DUMPS:-}" ]; then local line="$*"; echo "$(basename "$dump"): ${line:0:60}" >>"$work/dumps.txt"; fi
  echo "$dump $(( $(grep -m1 '^summary:' "$dump" | cut -d' ' -f2) / n ))"
}
count() {
  local dump per core entry
  read -r dump per < <(measure "$@")
  core=$(callgrind_annotate --auto=no --inclusive=no --threshold=100 "$dump" 2>/dev/null |
    awk '/layerbloom_filter::/ { gsub(",", "", $1); sum += $1 } END { print sum + 0 }')
  # The inclusive cost of the entry points from the raw dump (uncompressed names): within a
  # function's block every cost line counts, its own instructions and, after each `calls=`
  # line, the callee's inclusive cost.
  entry=$(awk '/^fn=/ { on = ($0 ~ /ScalableFilter::(add_many|contains_many|add|contains)$/); next }
    on && /^[0-9]/ { sum += $2 } END { print sum + 0 }' "$dump")
  echo "$per $(( core / n )) $(( entry / n ))"
}
# Instructions per command; the inclusive cost per command of the calls that functions outside
# `entries` (an awk regex on names) make into functions matching it: a core's work, counted
# once however its entry points call each other; and that of Redis's calls into the module's
# command (`RedisModuleCommandDispatcher`: the handler, the module API calls it makes, the
# module context), which leaves Redis's own path (parsing, lookup, replies sent) apart.
# The server's timer (`serverCron`) is left out of the total: its work per command grows with
# the wall time a command takes under callgrind, which a loaded machine stretches.
count_calls_into() {
  local entries=$1 dump per
  shift
  read -r dump per < <(measure "$@")
  awk -v re="$entries" -v n="$n" -v per="$per" '
    function is(name, what) { return name ~ ("^" what "$") }
    /^fn=/ { name = substr($0, 4); caller = (name ~ re); module = is(name, "RedisModuleCommandDispatcher"); timer = is(name, "serverCron"); next }
    /^cfn=/ { name = substr($0, 5); callee = (name ~ re); into = is(name, "RedisModuleCommandDispatcher"); cron = is(name, "serverCron"); next }
    /^calls=/ { take = !caller && callee; enter = !module && into; tick = !timer && cron; next }
    /^[0-9]/ { if (take) core += $2; if (enter) command += $2; if (tick) ticks += $2; take = 0; enter = 0; tick = 0 }
    END { printf "%d %d %d\n", per - ticks / n, command / n, core / n }' "$dump"
}

if [[ " $sections " == *" bf "* ]]; then
start_server "$module" layerbloom
cli BF.RESERVE f 0.001 1000000
cli BF.ADD f item
cli BF.RESERVE g 0.001 10000000
cli SET k v
cli SETBIT s 100000 1
n=20000
range=100000
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
stop_server
fi

# The same batch commands, and BF.ADD and BF.EXISTS single, split by where their instructions
# go (scripts/instructions_split.py): a server of its own, as callgrind records each
# instruction's address here (--dump-instr), which the tables above do not parse.
if [[ " $sections " == *" split "* ]]; then
command -v addr2line >/dev/null || { echo "needs addr2line" >&2; exit 1; }
start_server "$split_module" split --dump-instr=yes
cli BF.RESERVE g 0.001 10000000
cli BF.RESERVE f 0.001 1000000
cli BF.ADD f item
split_row() {
  local label=$1 per=$2 dump
  shift 2
  read -r dump _ < <(measure "$@")
  local row
  row=$(python3 "$(dirname "$0")/instructions_split.py" "$split_module" "$per" "$n" "$dump")
  echo "| $label | $row |"
}
echo
echo "Where the instructions go, per item (BF.ADD, BF.EXISTS: per command): all of them (without the server's timer);"
echo "Redis's own path (reading, parsing, looking the command up, writing replies out); the module context"
echo "Redis builds around the command; the glue and the core, and their parts"
echo "| command | all | Redis's path | module context | glue | core | core: hashing | core: positions and blocks | core: testing and setting bits | core: counting | core: batch path | glue: arguments | glue: key | glue: reply | glue: replication | glue: events | glue: statistics | glue: capacity and limits | glue: handler |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
n=2000
range=100000000000
new=() absent=()
for _ in $(seq 100); do new+=(__rand_int__); absent+=(a:__rand_int__); done
split_row "BF.MADD, 100 new items" 100 BF.MADD g "${new[@]}"
split_row "BF.INSERT, 100 new items" 100 BF.INSERT g ITEMS "${new[@]}"
split_row "BF.MEXISTS, 100 absent items" 100 BF.MEXISTS g "${absent[@]}"
n=20000
range=100000
split_row "BF.ADD f item, new" 1 BF.ADD f __rand_int__
split_row "BF.EXISTS f item, present" 1 BF.EXISTS f item
stop_server
fi

[[ " $sections " == *" cf "* ]] || exit 0
# The cuckoo commands, in a server with layerbloom and then in one with RedisBloom's module.
ours='(CuckooFilter|AnyFilter)::(add|add_nx|delete|contains|count|insert_many|insert_many_within|contains_many)$'
theirs='^(CuckooFilter_(Insert|InsertUnique|Check|Count|Delete)|MurmurHash64A_Bloom)$'
# The numbers redis-benchmark draws for the single commands (`__rand_int__` with -r 200000:
# 000000000000 to 000000199999), each added twice.
prefill() {
  cli CF.RESERVE c 4000000
  local i
  for copy in 1 2; do
    for ((i = 0; i < 200000; i += 100)); do
      printf 'CF.INSERT c ITEMS'
      seq -f ' %012.0f' "$i" $((i + 99)) | tr -d '\n'
      printf '\n'
    done
  done | redis-cli -p "$port" >/dev/null
}
declare -A cf_rows
cf_run() {
  local side=$1 entries=$2
  n=20000 range=200000
  cf_one() {
    local label=$1
    shift
    cf_rows["$side|$label"]=$(count_calls_into "$entries" "$@")
  }
  cf_one "CF.EXISTS c item, present" CF.EXISTS c __rand_int__
  cf_one "CF.EXISTS c item, absent" CF.EXISTS c a:__rand_int__
  cf_one "CF.ADD c item" CF.ADD c n:__rand_int__
  cf_one "CF.DEL c item, present" CF.DEL c __rand_int__
  local new=() absent=() present=()
  for _ in $(seq 100); do new+=(m:__rand_int__); absent+=(a:__rand_int__); present+=(__rand_int__); done
  n=2000 range=100000000000
  cf_one "CF.INSERT c ITEMS, 100 new items" CF.INSERT c ITEMS "${new[@]}"
  cf_one "CF.MEXISTS c, 100 absent items" CF.MEXISTS c "${absent[@]}"
  range=200000
  cf_one "CF.MEXISTS c, 100 present items" CF.MEXISTS c "${present[@]}"
}
sides=(layerbloom)
start_server "$module" cf-layerbloom
prefill
cf_run layerbloom "$ours"
stop_server
if [ -n "$peer" ]; then
  sides+=(redisbloom)
  start_server "$peer" cf-redisbloom
  prefill
  cf_run redisbloom "$theirs"
  stop_server
fi
echo
echo "Cuckoo filters, instructions per command (batches: per item): all of them (without the server's timer); the module's command"
echo "(what Redis's call into it costs: the handler, the module API calls it makes, its context);"
echo "of that, the core (its entry points, hashing included) and the glue (the rest of the command)"
if [ -n "$peer" ]; then
  echo "| command | layerbloom | its command | core | glue | RedisBloom 2.8.2 | its command | core | glue | all: RedisBloom / layerbloom | command: RedisBloom / layerbloom |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
else
  echo "| command | layerbloom | its command | core | glue |"
  echo "|---|---|---|---|---|"
fi
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
for label in "CF.EXISTS c item, present" "CF.EXISTS c item, absent" "CF.ADD c item" \
  "CF.DEL c item, present" "CF.INSERT c ITEMS, 100 new items" "CF.MEXISTS c, 100 absent items" \
  "CF.MEXISTS c, 100 present items"; do
  per=1
  [[ "$label" == *"100 "* ]] && per=100
  line="| $label"
  for side in "${sides[@]}"; do
    read -r c command core <<<"${cf_rows["$side|$label"]}"
    line+=" | $(( c / per )) | $(( command / per )) | $(( core / per )) | $(( (command - core) / per ))"
  done
  if [ -n "$peer" ]; then
    read -r ours_c ours_command _ <<<"${cf_rows["layerbloom|$label"]}"
    read -r theirs_c theirs_command _ <<<"${cf_rows["redisbloom|$label"]}"
    line+=" | $(ratio "$theirs_c" "$ours_c") | $(ratio "$theirs_command" "$ours_command")"
  fi
  echo "$line |"
done
