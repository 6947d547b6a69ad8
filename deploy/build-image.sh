#!/usr/bin/env bash
# `make image`: the plugin image (Dockerfile) for each architecture in ARCHES (default amd64 arm64),
# as OCI archives in target/image/. Builds the static musl release binary of each architecture first,
# then the image with buildah (no Docker daemon needed; as root, vfs storage, chroot isolation), then
# checks each archive as a cluster would use it (tests/image/run.sh).
# Needs: rustup's musl targets (and a linker for the foreign one: cargo-zigbuild, if installed, is
# used), buildah.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
source_url=$(git config --get remote.origin.url 2>/dev/null || true)
out=target/image
mkdir -p "$out"
archives=()
command -v buildah >/dev/null || { echo "image: buildah is missing (apt-get install -y buildah)" >&2; exit 1; }

for arch in ${ARCHES:-amd64 arm64}; do
  case "$arch" in
    amd64) triple=x86_64-unknown-linux-musl ;;
    arm64) triple=aarch64-unknown-linux-musl ;;
    *) echo "image: unknown architecture $arch" >&2; exit 1 ;;
  esac
  rustup target list --installed | grep -qx "$triple" || rustup target add "$triple"
  if [ "$arch" != amd64 ] && command -v cargo-zigbuild >/dev/null; then
    cargo zigbuild -p velero-wasm --release --target "$triple"
  else
    cargo build -p velero-wasm --release --target "$triple"
  fi
  started=$(date +%s)
  buildah --storage-driver vfs build --isolation chroot --arch "$arch" \
    --build-arg "BINARY=target/$triple/release/velero-wasm" \
    --build-arg "VERSION=$version" --build-arg "SOURCE=$source_url" \
    --tag "velero-wasm:$version-$arch" -f Dockerfile .
  rm -f "$out/velero-wasm-$version-$arch.tar"
  buildah --storage-driver vfs push "velero-wasm:$version-$arch" "oci-archive:$out/velero-wasm-$version-$arch.tar"
  echo "image: $out/velero-wasm-$version-$arch.tar ($(du -h "$out/velero-wasm-$version-$arch.tar" | cut -f1)), image built in $(( $(date +%s) - started )) s"
  archives+=("$out/velero-wasm-$version-$arch.tar")
done
[ -x target/debug/velero-wasm ] || cargo build -p velero-wasm
tests/image/run.sh "${archives[@]}"
