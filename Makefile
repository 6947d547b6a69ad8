# velero-wasm — common tasks. `make help` lists them.
CARGO ?= cargo
BIN := target/debug/velero-wasm
FIXTURES := tests/fixtures

.PHONY: help build test lint run bench interop clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## Build the components (wasm32-wasip2), then the host binary that embeds them
	$(CARGO) build -p velero-wasm

test: build ## Run every test: unit, component, integration
	$(CARGO) test --workspace

lint: ## cargo fmt --check and clippy -D warnings
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

run: build ## The README demo
	$(BIN) run --action test.velero-wasm.io/echo --item $(FIXTURES)/demo/configmap.json --backup $(FIXTURES)/demo/backup.json --cluster $(FIXTURES)/demo

bench: ## Per-call cost of a wasm action vs the same work in native Rust, and over gRPC (prints tables)
	$(CARGO) bench -p velero-wasm --bench call
	$(CARGO) bench -p velero-wasm --bench grpc

interop: build ## The real hashicorp go-plugin client against the binary (Debian's Go packages, offline)
	tests/interop/run.sh

clean: ## Remove build output
	$(CARGO) clean
