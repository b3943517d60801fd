#!/usr/bin/env bash
# Fetches packages from Debian 13 (trixie) and unpacks them under DIR/root, without touching
# the system's apt sources or state: a private sources.list, lists and cache under DIR/apt,
# signed by trixie's keys from debian-archive-keyring. Nothing is installed.
#
#   scripts/trixie.sh DIR package...
set -euo pipefail
dir=$1; shift
keys=(/usr/share/keyrings/debian-archive-trixie-stable.gpg
      /usr/share/keyrings/debian-archive-trixie-automatic.gpg)

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
    { echo "trixie.sh: needs apt-get and dpkg-deb (Debian or Ubuntu)" >&2; exit 1; }
# Debian 12's debian-archive-keyring carries trixie's keys since 2023.3+deb12u1.
if [ ! -e "${keys[0]}" ] || [ ! -e "${keys[1]}" ]; then
    if [ "$(id -u)" -eq 0 ]; then sudo=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo)
    else
        echo "trixie's archive keys are missing; update them with:" >&2
        echo "  sudo apt-get update && sudo apt-get install -y debian-archive-keyring" >&2
        exit 1
    fi
    echo "installing: debian-archive-keyring (trixie's archive keys)" >&2
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq debian-archive-keyring >&2
fi

apt=$dir/apt
rm -rf "$dir" && mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/parts" \
    "$dir/debs" "$dir/root"
signed=$(IFS=,; echo "${keys[*]}")
echo "deb [arch=amd64 signed-by=$signed] http://deb.debian.org/debian trixie main" \
    > "$apt/sources.list"
opts=(-q -o Dir::Etc::sourcelist="$apt/sources.list" -o Dir::Etc::sourceparts="$apt/parts"
      -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache"
      -o APT::Sandbox::User=root -o Debug::NoLocking=1)
apt-get "${opts[@]}" update >&2
(cd "$dir/debs" && apt-get "${opts[@]}" download "$@" >&2)
for deb in "$dir"/debs/*.deb; do
    dpkg-deb -x "$deb" "$dir/root"
done
ls "$dir/debs" >&2
# The lists (tens of MB) served only this download.
rm -rf "$apt"
