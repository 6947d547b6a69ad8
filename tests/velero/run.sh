#!/usr/bin/env bash
# `make velero`: velero-wasm inside Velero's own plugin client. Builds the Go driver of this directory
# (tests/velero/build.sh: Velero v1.18.3 from the Go module proxy, binary under target/velero/), then
# runs it against $BINARY (default: the static build `make test` builds and tests,
# target/<arch>-unknown-linux-musl/debug/velero-wasm) with the test components
# (target/wasm/wasm32-wasip2/component/{kinds,misbehave}.wasm).
# The driver prints one line per check and ends with `N passed, N failed`.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/target/velero
binary=${BINARY:-$root/target/$(uname -m)-unknown-linux-musl/debug/velero-wasm}
components=$root/target/wasm/wasm32-wasip2/component

[ -x "$binary" ] || { echo "velero: $binary is missing: run make velero (it builds it)" >&2; exit 1; }
for name in kinds misbehave; do
  [ -f "$components/$name.wasm" ] || { echo "velero: $components/$name.wasm is missing: run make velero (it builds it)" >&2; exit 1; }
done

tests/velero/build.sh

echo "--- run against $binary"
"$out/velero-driver" -binary "$binary" -components "$components" -work "$out/work"
