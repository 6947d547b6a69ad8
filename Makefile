# velero-wasm — common tasks. `make help` lists them.
CARGO ?= cargo
BIN := target/debug/velero-wasm
# The tests, Velero's plugin client and the empty-root check all run the static (musl) build, the binary
# the image ships: one build of the dependency graph for all of them (tests/stages.sh).
MUSL := $(shell uname -m)-unknown-linux-musl
TEST_BUILD := $(CARGO) test --workspace --target $(MUSL) --no-run
FIXTURES := tests/fixtures

.PHONY: help deps build test lint run bench bench-velero velero static memory image python javascript e2e fuzz clean

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

deps: ## Install what builds and tests need and a fresh machine lacks (.ci/deps)
	@.ci/deps

build: ## Build the components (wasm32-wasip2), then the host binary that embeds them
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
	$(CARGO) build -p velero-wasm

test: ## Run every test (unit, component, integration, Velero's plugin client, static binary); a line per stage
	@CARGO=$(CARGO) tests/stages.sh

lint: ## cargo fmt --check and clippy -D warnings
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

run: build ## The README demo: back up the running VM of the KubeVirt fixture cluster, print its additional items
	$(BIN) run --action kubevirt-velero-plugin/backup-virtualmachine-action --item $(FIXTURES)/kubevirt/cluster/vm-fedora-web-01.json --backup $(FIXTURES)/kubevirt/velero/backup-nightly.json --cluster $(FIXTURES)/kubevirt/cluster

bench: ## Per-call cost of a wasm action vs native Rust, over gRPC, a VM backup against a loopback API server, a 1,000-VM backup with read views and batched reads off and on, and a 100-VM backup with an action added while Velero runs (prints tables)
	$(CARGO) bench -p velero-wasm --bench call
	$(CARGO) bench -p velero-wasm --bench grpc
	$(CARGO) bench -p velero-wasm --bench online
	$(CARGO) bench -p velero-wasm --bench scale
	$(CARGO) bench -p velero-wasm --bench slot

velero: deps ## Velero's own plugin client (v1.18.3, built with Go from the module proxy) against the binary: every kind, what a backup counts
	$(TEST_BUILD)
	tests/velero/run.sh

static: velero ## The musl build is static and serves in an empty chroot (docs/plugin-protocol.md#c22; the chroot part needs root)
	tests/static/run.sh

memory: ## Memory attacks (endless answers, a read-all of 64 answers of 15 MiB, 64 concurrent 15 MiB gets through Velero's plugin client, an archive of [0,0,…] items, a shadow answering 60 MB items to Velero's plugin client, ten cold JavaScript modules) on the host inside a 512 MiB memory cgroup, Velero's default container limit: peak memory per attack (root; about 3 min, 40 s more the first time npm installs componentize-js; not part of test, CI runs it after e2e)
	$(TEST_BUILD)
	tests/memory/run.sh

python: ## Python modules (componentize-py from PyPI), backup, restore and delete, pass their Rust twins' suites and a suite of their settings path; bench and size of each (about 7 min after the test build; not part of test, CI runs it after e2e)
	tests/python/run.sh

javascript: ## JavaScript modules (componentize-js from npm), backup, restore and delete, pass their Rust twins' suites and a suite of their settings path; bench and size of each (about 5 min after the host build; not part of test, CI runs it after python)
	tests/javascript/run.sh

image: ## The plugin image for amd64 and arm64 as OCI archives in target/image/, each checked (tests/image/run.sh; root, buildah; not part of test)
	@.ci/deps image
	deploy/build-image.sh

e2e: ## A backup and a restore in real Velero 1.18.3 (server, AWS plugin, moto's S3, kube-apiserver on loopback), also with a trapping shadow; last line the result (tests/e2e/run.sh; about 4 min after the test build, most of it building Velero; not part of test, CI runs it after it)
	@.ci/deps e2e
	$(TEST_BUILD)
	tests/e2e/run.sh

bench-velero: ## Real Velero 1.18.3 backing up VMS generated VMs (default 100) and one VM, through toxiproxy at 0 and 2 ms: Velero alone, velero-wasm stock, the kubevirt module only, kubevirt upstream mode, read views off, 1 and 4 item-block workers, RUNS a row (default 3); a line a row, then a table (release build; docs/benchmarks.md; not part of test or CI)
	@.ci/deps e2e
	$(CARGO) build --release --target $(MUSL) -p velero-wasm --bin velero-wasm
	BINARY=target/$(MUSL)/release/velero-wasm tests/bench-velero/run.sh

# Every fuzz target (fuzz/fuzz_targets/), each run for FUZZ_SECONDS; see fuzz/README.md.
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= grpc documents manifest selectors kube_calls guest_capabilities diff_archive oci settings
# The components are built by the default (stable) toolchain, as `make build` builds them, and the
# nightly build of the host embeds those (host/build.rs): nightly needs no wasm32-wasip2 std.
COMPONENTS := $(notdir $(patsubst %/Cargo.toml,%,$(wildcard actions/*/Cargo.toml tests/components/*/Cargo.toml)))
FUZZ := VELERO_WASM_PREBUILT_COMPONENTS=$(CURDIR)/target/wasm/wasm32-wasip2/component nice -n 19 $(CARGO) +nightly fuzz

fuzz: ## Fuzz each target for FUZZ_SECONDS (default 600) at the lowest priority, then minimise its corpus
	@rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@$(CARGO) +nightly fuzz --version >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked
	$(CARGO) build --target wasm32-wasip2 --profile component --target-dir target/wasm $(addprefix -p ,$(COMPONENTS))
	$(FUZZ) build -s none
	@failed=""; for target in $(FUZZ_TARGETS); do \
	  echo "== fuzz $$target for $(FUZZ_SECONDS) s"; \
	  $(FUZZ) run -s none $$target -- -max_total_time=$(FUZZ_SECONDS) -timeout=30 -print_final_stats=1 || failed="$$failed $$target"; \
	  $(FUZZ) cmin -s none $$target >/dev/null 2>&1 || echo "fuzz: minimising the $$target corpus failed"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: crashes in$$failed: see fuzz/artifacts/"; exit 1; fi

clean: ## Remove build output
	$(CARGO) clean
