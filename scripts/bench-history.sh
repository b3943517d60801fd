#!/usr/bin/env bash
# The working tree's module side by side with an earlier build of it (docs/BENCHMARKS.md,
# "Against our own history"): `scripts/bench-history.sh [commit] [--runs R --rounds K --items N --commands C]`.
#
# The earlier commit (default: the last release, the commit in the file RELEASE) is checked
# out in a detached git worktree under target/history/<commit>/src and built there into its
# own target directory (target/history/target); the working tree and its target/ are never
# touched. Then examples/history.rs runs both modules in servers of one binary
# (LAYERBLOOM_SERVER, default redis-server), interleaved, over several fresh runs.
# A measurement, never a test: it fails only when something cannot be built or run.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
commit=$(grep -v '^#' RELEASE | head -1)
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
    commit=$1
    shift
fi
full=$(git rev-parse --verify "$commit^{commit}")
short=${full:0:7}
hist=$repo/target/history
src=$hist/$short/src
if [ ! -d "$src" ]; then
    mkdir -p "$hist/$short"
    git worktree add --detach "$src" "$full" >&2
fi
echo "building $short in $src" >&2
(cd "$src" && CARGO_TARGET_DIR=$hist/target cargo build --release -p layerbloom >&2)
cp "$hist/target/release/liblayerbloom.so" "$hist/$short.so"
echo "building the working tree" >&2
cargo build --release -p layerbloom >&2
cargo build --release --example history >&2
server=${LAYERBLOOM_SERVER:-redis-server}
echo "server: $server ($("$server" --version | head -1)); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec target/release/examples/history --base "$hist/$short.so" --ours target/release/liblayerbloom.so \
    --server "$server" --label "$short" "$@"
