#!/usr/bin/env bash
# `make image`: the plugin image (Dockerfile) for each architecture in ARCHES (default amd64 arm64),
# as OCI archives in target/image/. Builds the static musl release binary of each architecture first,
# then the image with buildah (no Docker daemon needed; as root, vfs storage, chroot isolation), then
# checks each archive as a cluster would use it (tests/image/run.sh).
# Needs: rustup's musl targets, buildah, and for the architecture of another machine a linker for it:
# cargo-zigbuild with zig (pip install cargo-zigbuild ziglang: installed here when missing), or
# CARGO_TARGET_<TRIPLE>_LINKER set to a cross linker.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
# The image's source label: the workspace's `repository` (what crates.io links), not this clone's
# remote, which may be a fork, a local path or a URL with credentials in it.
source_url=$(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "$source_url" ] || { echo "image: Cargo.toml's [workspace.package] has no repository" >&2; exit 1; }
here=$(uname -m)
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
  linker_var=CARGO_TARGET_$(echo "$triple" | tr 'a-z-' 'A-Z_')_LINKER
  if [ "${triple%%-*}" = "$here" ] || [ -n "${!linker_var:-}" ]; then
    cargo build -p velero-wasm --release --target "$triple"
  else
    # Another machine's binary (and ring's C parts in it) needs its linker and C compiler: zig's.
    if ! command -v cargo-zigbuild >/dev/null; then
      echo "image: $arch on $here needs a linker for $triple; installing cargo-zigbuild and ziglang (pip)"
      python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore cargo-zigbuild ziglang || true
      hash -r
    fi
    command -v cargo-zigbuild >/dev/null || {
      echo "image: $arch on $here needs a linker for $triple: pip install cargo-zigbuild ziglang" \
        "(and put cargo-zigbuild on PATH), or set $linker_var to a cross linker" >&2
      exit 1
    }
    cargo zigbuild -p velero-wasm --release --target "$triple"
  fi
  # The image gets the binary without its symbol table, which is most of an unstripped build's size
  # (zig's linker strips already; the host's strip handles the host's architecture).
  binary=$out/velero-wasm-$arch
  cp "target/$triple/release/velero-wasm" "$binary"
  if [ "${triple%%-*}" = "$here" ]; then strip "$binary"; fi
  started=$(date +%s)
  buildah --storage-driver vfs build --isolation chroot --arch "$arch" \
    --build-arg "BINARY=$binary" \
    --build-arg "VERSION=$version" --build-arg "SOURCE=$source_url" \
    --tag "velero-wasm:$version-$arch" -f Dockerfile .
  rm -f "$out/velero-wasm-$version-$arch.tar"
  buildah --storage-driver vfs push "velero-wasm:$version-$arch" "oci-archive:$out/velero-wasm-$version-$arch.tar"
  echo "image: $out/velero-wasm-$version-$arch.tar ($(du -h "$out/velero-wasm-$version-$arch.tar" | cut -f1)), image built in $(( $(date +%s) - started )) s"
  archives+=("$out/velero-wasm-$version-$arch.tar")
done
[ -x target/debug/velero-wasm ] || cargo build -p velero-wasm
tests/image/run.sh "${archives[@]}"
