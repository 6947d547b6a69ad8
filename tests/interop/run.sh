#!/usr/bin/env bash
# `make interop`: velero-wasm against the real hashicorp go-plugin client, built offline from Debian's
# Go packages (GOPATH mode, no module proxy). Drives the binary $BINARY (default: the static one that
# `make test` builds and tests, target/<arch>-unknown-linux-musl/debug/velero-wasm) with the test
# components; `make interop` builds both first. Everything it makes goes to target/interop/.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/target/interop
gopath=$out/gopath
binary=${BINARY:-$root/target/$(uname -m)-unknown-linux-musl/debug/velero-wasm}
components=$root/target/wasm/wasm32-wasip2/component
proto=$root/host/proto

for tool in go protoc protoc-gen-go; do
  command -v "$tool" >/dev/null || { echo "interop: $tool is missing; install: apt-get install -y golang-go golang-github-hashicorp-go-plugin-dev golang-google-grpc-dev protoc-gen-go-grpc golang-goprotobuf-dev protobuf-compiler" >&2; exit 1; }
done
[ -d /usr/share/gocode/src/github.com/hashicorp/go-plugin ] || { echo "interop: go-plugin is missing: apt-get install -y golang-github-hashicorp-go-plugin-dev" >&2; exit 1; }
[ -x "$binary" ] || { echo "interop: $binary is missing: run make interop (it builds it)" >&2; exit 1; }

echo "--- modules: the test components with their manifests"
modules=$out/modules
rm -rf "$modules" && mkdir -p "$modules"
for name in kinds misbehave; do
  cp "$components/$name.wasm" "$modules/"
  printf 'sha256 = "%s"\n[limits]\ntimeout = "10s"\n' "$(sha256sum "$modules/$name.wasm" | cut -d' ' -f1)" > "$modules/$name.toml"
done

echo "--- Go stubs from host/proto (protoc-gen-go, plugins=grpc)"
rm -rf "$gopath/src/velerowasm" "$gopath/src/interop"
mkdir -p "$gopath/src/velerowasm/generated" "$gopath/src/interop"
# Our .proto files carry no go_package: map each file to its Go package here (Velero's layout), and the
# well-known types to the packages Debian's golang-goprotobuf-dev provides.
map="Mgoogle/protobuf/timestamp.proto=github.com/golang/protobuf/ptypes/timestamp"
map+=",Mgoogle/protobuf/duration.proto=github.com/golang/protobuf/ptypes/duration"
map+=",Mgoogle/protobuf/empty.proto=github.com/golang/protobuf/ptypes/empty"
for f in Shared PluginLister BackupItemAction RestoreItemAction DeleteItemAction; do
  map+=",M$f.proto=velerowasm/generated"
done
for f in backupitemaction/v2/BackupItemAction restoreitemaction/v2/RestoreItemAction itemblockaction/v1/ItemBlockAction plugin/grpc_stdio; do
  map+=",M$f.proto=velerowasm/$(dirname "$f")"
done
protoc -I "$proto" --go_out="plugins=grpc,paths=source_relative,$map:$gopath/src/velerowasm/generated" \
  "$proto"/{Shared,PluginLister,BackupItemAction,RestoreItemAction,DeleteItemAction}.proto
# protoc-gen-go wants one Go package per run: the two `v2` files are two Go packages, as in Velero.
for f in backupitemaction/v2/BackupItemAction restoreitemaction/v2/RestoreItemAction itemblockaction/v1/ItemBlockAction plugin/grpc_stdio; do
  protoc -I "$proto" --go_out="plugins=grpc,paths=source_relative,$map:$gopath/src/velerowasm" "$proto/$f.proto"
done
cp "$root"/tests/interop/*.go "$gopath/src/interop/"

echo "--- build the client (GOPATH mode, offline)"
export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOPROXY=off GOFLAGS= GOCACHE="$out/gocache"
(cd "$gopath/src/interop" && go build -o "$out/interop" .)

echo "--- run"
"$out/interop" -binary "$binary" -modules "$modules"
