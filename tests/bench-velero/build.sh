#!/usr/bin/env bash
# Builds what `make bench-velero` adds to `make e2e`'s binaries, pinned by tests/bench-velero/go.mod,
# into target/bench-velero/bin/: toxiproxy's server (the latency injector, from the Go module proxy)
# and vmgen (ours, the standard library only). The build cache is the machine's own (go env GOCACHE).
# Skipped when both binaries are newer than their inputs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/tests/bench-velero"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
out=$root/target/bench-velero/bin
mkdir -p "$out"
fresh=1
for binary in toxiproxy-server vmgen; do
  for source in go.mod go.sum build.sh vmgen/main.go; do
    [ -x "$out/$binary" ] && [ "$out/$binary" -nt "$source" ] || fresh=""
  done
done
if [ -n "$fresh" ]; then
  echo "bench-velero build: $out/{toxiproxy-server,vmgen} are up to date"
  exit 0
fi
start=$SECONDS
go build -trimpath -ldflags "-s -w" -o "$out/toxiproxy-server" github.com/Shopify/toxiproxy/v2/cmd/server
go build -trimpath -ldflags "-s -w" -o "$out/vmgen" ./vmgen
echo "bench-velero build: toxiproxy-server and vmgen in $((SECONDS - start)) s (GOCACHE $(go env GOCACHE))"
