#!/usr/bin/env bash
# `make velero`: velero-wasm inside Velero's own plugin client. Builds the Go driver of this directory
# against github.com/vmware-tanzu/velero (pinned in go.mod/go.sum, fetched through the Go module proxy;
# build cache under target/go/cache, binary under target/velero/), then runs it against $BINARY
# (default: the static build `make test` builds and tests, target/<arch>-unknown-linux-musl/debug/
# velero-wasm) with the test components (target/wasm/wasm32-wasip2/component/{kinds,misbehave}.wasm).
# The driver prints one line per check and ends with `N passed, N failed`.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/target/velero
binary=${BINARY:-$root/target/$(uname -m)-unknown-linux-musl/debug/velero-wasm}
components=$root/target/wasm/wasm32-wasip2/component

command -v go >/dev/null || { echo "velero: go is missing: install Go >= 1.26 (https://go.dev/dl/) and put it on PATH" >&2; exit 1; }
[ -x "$binary" ] || { echo "velero: $binary is missing: run make velero (it builds it)" >&2; exit 1; }
for name in kinds misbehave; do
  [ -f "$components/$name.wasm" ] || { echo "velero: $components/$name.wasm is missing: run make velero (it builds it)" >&2; exit 1; }
done

echo "--- build the driver (Velero v1.18.3's plugin client; $(go version | cut -d' ' -f3))"
# The same Go environment and flags as tests/e2e/build.sh (and the same k8s.io versions in go.mod), so
# the two builds share one build cache.
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0 GOCACHE="$root/target/go/cache"
mkdir -p "$out"
start=$SECONDS
(cd tests/velero && go build -trimpath -o "$out/velero-driver" .)
echo "built in $((SECONDS - start)) s"

echo "--- run against $binary"
"$out/velero-driver" -binary "$binary" -components "$components" -work "$out/work"
