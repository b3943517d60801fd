# layerbloom: build, run, test, lint.
MODULE := target/release/liblayerbloom.so
CARGO  ?= cargo

.PHONY: all build run test unit-test integration-test lint fmt clean

all: build

## build: the module, optimised (target/release/liblayerbloom.so)
build:
	$(CARGO) build --release -p layerbloom

## run: build, then start redis-server with the module, configured by redis.conf.example
run: build
	redis-server redis.conf.example

## test: every unit and integration test (integration tests spawn their own redis-server)
test: build
	$(CARGO) test --release --workspace

unit-test:
	$(CARGO) test --release --workspace --lib

integration-test: build
	$(CARGO) test --release -p layerbloom --tests

## lint: formatting and clippy, warnings as errors
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
