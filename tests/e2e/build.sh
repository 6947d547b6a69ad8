#!/usr/bin/env bash
# Builds what `make e2e` runs from the Go module proxy, pinned by tests/e2e/go.mod: the velero binary
# (server and CLI) and velero-plugin-for-aws, and our kubeobj client, into target/e2e/bin/. The build cache is the
# machine's own (go env GOCACHE, shared by every clone). Prints how long the build took.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/tests/e2e"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
out=$root/target/e2e/bin
mkdir -p "$out"
fresh=1
for binary in velero velero-plugin-for-aws kubeobj; do
  for source in go.mod go.sum build.sh kubeobj/main.go; do
    [ -x "$out/$binary" ] && [ "$out/$binary" -nt "$source" ] || fresh=""
  done
done
if [ -n "$fresh" ]; then
  echo "e2e build: $out/{velero,velero-plugin-for-aws,kubeobj} are up to date"
  exit 0
fi
start=$SECONDS
go build -trimpath -ldflags "-s -w" -o "$out/velero" github.com/vmware-tanzu/velero/cmd/velero
go build -trimpath -ldflags "-s -w" -o "$out/velero-plugin-for-aws" github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws
go build -trimpath -ldflags "-s -w" -o "$out/kubeobj" ./kubeobj
echo "e2e build: velero, velero-plugin-for-aws and kubeobj in $((SECONDS - start)) s (GOCACHE $(go env GOCACHE))"
