# velero-wasm — common tasks. `make help` lists them.
CARGO ?= cargo
BIN := target/debug/velero-wasm
FIXTURES := tests/fixtures

.PHONY: help deps build test lint run bench interop clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

deps: ## Install what builds and tests need and a fresh machine lacks
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

build: deps ## Build the components (wasm32-wasip2), then the host binary that embeds them
	$(CARGO) build -p velero-wasm

test: build ## Run every test: unit, component, integration
	$(CARGO) test --workspace

lint: deps ## cargo fmt --check and clippy -D warnings
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

run: build ## The README demo: back up the running VM of the KubeVirt fixture cluster, print its additional items
	$(BIN) run --action kubevirt-velero-plugin/backup-virtualmachine-action --item $(FIXTURES)/kubevirt/cluster/vm-fedora-web-01.json --backup $(FIXTURES)/kubevirt/velero/backup-nightly.json --cluster $(FIXTURES)/kubevirt/cluster

bench: ## Per-call cost of a wasm action vs the same work in native Rust (prints a table)
	$(CARGO) bench -p velero-wasm --bench call

clean: ## Remove build output
	$(CARGO) clean
