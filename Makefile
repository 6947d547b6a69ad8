# velero-wasm — common tasks. `make help` lists them.
CARGO ?= cargo
BIN := target/debug/velero-wasm
FIXTURES := tests/fixtures

.PHONY: help deps build test lint run bench interop static clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

deps: ## Install what builds and tests need and a fresh machine lacks (.ci/deps)
	@.ci/deps

build: ## Build the components (wasm32-wasip2), then the host binary that embeds them
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
	$(CARGO) build -p velero-wasm

test: deps build ## Run every test: unit, component, integration, the go-plugin interop, the static binary
	$(CARGO) test --workspace
	tests/interop/run.sh
	tests/static/run.sh

lint: ## cargo fmt --check and clippy -D warnings
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

run: build ## The README demo: back up the running VM of the KubeVirt fixture cluster, print its additional items
	$(BIN) run --action kubevirt-velero-plugin/backup-virtualmachine-action --item $(FIXTURES)/kubevirt/cluster/vm-fedora-web-01.json --backup $(FIXTURES)/kubevirt/velero/backup-nightly.json --cluster $(FIXTURES)/kubevirt/cluster

bench: ## Per-call cost of a wasm action vs native Rust, over gRPC, and a VM backup against a loopback API server (prints tables)
	$(CARGO) bench -p velero-wasm --bench call
	$(CARGO) bench -p velero-wasm --bench grpc
	$(CARGO) bench -p velero-wasm --bench online

interop: deps build ## The real hashicorp go-plugin client against the binary (Debian's Go packages, offline)
	tests/interop/run.sh

static: interop ## The musl build is static and serves in an empty chroot (C22; the chroot part needs root)
	tests/static/run.sh

clean: ## Remove build output
	$(CARGO) clean
