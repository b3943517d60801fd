# layerbloom in the official Redis image. Not built or run by CI here (no container engine).
#
#   docker build -t layerbloom .
#   docker run --rm -p 127.0.0.1:6379:6379 layerbloom
#
# The module is built in a Rust image of the same Debian release as the Redis image, so the
# .so needs no newer glibc than the runtime has. REDIS_TAG picks the Redis image; stay on 7.x:
# the redis:8 images bundle Redis's own modules, RedisBloom among them, whose module name (bf)
# and BF.* commands are the ones layerbloom registers.
ARG REDIS_TAG=7.4-bookworm

FROM rust:1-bookworm AS build
# bindgen (redis-module crate) needs libclang.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libclang-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release -p layerbloom \
    && install -D -m 0755 target/release/liblayerbloom.so /out/liblayerbloom.so

FROM redis:${REDIS_TAG}
COPY --from=build /out/liblayerbloom.so /usr/local/lib/redis/modules/liblayerbloom.so
# Module arguments follow the path (see docs/configuration.md), e.g. ERROR_RATE 0.001.
CMD ["redis-server", "--loadmodule", "/usr/local/lib/redis/modules/liblayerbloom.so"]
