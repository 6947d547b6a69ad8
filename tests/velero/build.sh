#!/usr/bin/env bash
# Builds the Go driver of this directory (Velero v1.18.3's plugin client, tests/velero/main.go) against
# github.com/vmware-tanzu/velero (pinned in go.mod/go.sum, fetched through the Go module proxy) into
# target/velero/velero-driver, in the machine's Go build cache (go env GOCACHE). tests/velero/run.sh (`make velero`)
# and tests/memory/run.sh (`make memory`) run it.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/target/velero

command -v go >/dev/null || { echo "velero: go is missing: install Go >= 1.26 (https://go.dev/dl/) and put it on PATH" >&2; exit 1; }
echo "--- build the driver (Velero v1.18.3's plugin client; $(go version | cut -d' ' -f3))"
# The same Go environment and flags as tests/e2e/build.sh (and the same k8s.io versions in go.mod), so
# the two builds share one build cache. That cache is the machine's own (go env GOCACHE): Go's cache is
# content-addressed and safe to share, so a second clone on this machine builds in seconds.
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0
mkdir -p "$out"
start=$SECONDS
(cd tests/velero && go build -trimpath -o "$out/velero-driver" .)
echo "built in $((SECONDS - start)) s"
