#!/usr/bin/env bash
# Builds the real kube-apiserver the live tests and `make e2e` run (tests/kube/start.sh), from
# k8s.io/kubernetes pinned by tests/kube/go.mod, into target/kube/bin/kube-apiserver. Skips the build
# when the binary is newer than go.mod and go.sum. The Go build cache is the machine's own
# (go env GOCACHE, content-addressed, shared by every clone), so a second clone builds in seconds. etcd is not built here: Debian's etcd-server (.ci/deps) serves.
# Prints what it does and how long it took.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/tests/kube"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
out=$root/target/kube/bin
bin=$out/kube-apiserver
mkdir -p "$out"
# k8s.io/kubernetes v1.34 needs Go 1.24 or newer (Debian 12's golang-go is 1.19).
need=$(sed -n 's/^go //p' go.mod)
have=$(go env GOVERSION 2>/dev/null | sed 's/^go//') || have=none
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
  echo "kube build: Go $need or newer is needed, \`go\` on PATH is ${have}; put a newer Go first in PATH" >&2
  exit 1
fi
if [ -x "$bin" ] && [ "$bin" -nt go.mod ] && [ "$bin" -nt go.sum ]; then
  echo "kube build: $bin is up to date ($(sed -n 's/^require k8s.io\/kubernetes //p' go.mod))"
  exit 0
fi
version=$(sed -n 's/^require k8s.io\/kubernetes //p' go.mod)
echo "kube build: kube-apiserver $version (k8s.io/kubernetes from the Go module proxy) -> $bin (GOCACHE $(go env GOCACHE))"
start=$SECONDS
# -trimpath and -s -w: smaller binary, less to link; the version is stamped so /version tells it.
go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)" \
  -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$bin.tmp" "$bin"
echo "kube build: kube-apiserver in $((SECONDS - start)) s"
