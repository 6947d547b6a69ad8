#!/usr/bin/env bash
# The plugin image, checked as a cluster would use it: `tests/image/run.sh ARCHIVE...` (make image runs
# it on what it built). For each OCI archive: unpack it (skopeo, umoci), check that the root file
# system holds exactly one file, /plugins/velero-wasm, that the image runs as 65532:65532 with the
# entrypoint `/plugins/velero-wasm install-plugin /target` and carries its version and source labels
# (the workspace's version and repository, Cargo.toml). Then (for an image of another architecture,
# under its qemu-user-static emulator; skipped when that is not installed) run that entrypoint as the
# image's user in a chroot of the
# unpacked root file system, with an empty /target as Velero's init container has, and run the README
# demo with the binary it installed: its answer must equal the debug build's. Needs root (chroot).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
dynamic=$root/target/debug/velero-wasm
demo=(run --action kubevirt-velero-plugin/backup-virtualmachine-action
  --item tests/fixtures/kubevirt/cluster/vm-fedora-web-01.json
  --backup tests/fixtures/kubevirt/velero/backup-nightly.json
  --cluster tests/fixtures/kubevirt/cluster)

[ $# -gt 0 ] || { echo "usage: tests/image/run.sh ARCHIVE..." >&2; exit 2; }
for tool in skopeo umoci python3 chroot; do
  command -v "$tool" >/dev/null || { echo "image check: $tool is missing (apt-get install -y skopeo umoci)" >&2; exit 1; }
done
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
source_url=$(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "$source_url" ] || { echo "image check: Cargo.toml's [workspace.package] has no repository" >&2; exit 1; }
here=$(uname -m)

fail() { echo "image check: FAIL: $*" >&2; exit 1; }

for archive in "$@"; do
  echo "--- $archive"
  work=$(mktemp -d "${TMPDIR:-/tmp}/image-check.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  skopeo copy -q "oci-archive:$archive" "oci:$work/layout:check"
  umoci unpack --image "$work/layout:check" "$work/bundle" >/dev/null

  files=$(cd "$work/bundle/rootfs" && find . -mindepth 1 ! -type d | sort)
  [ "$files" = "./plugins/velero-wasm" ] || fail "the image holds more than /plugins/velero-wasm: $files"
  echo "ok    one file: /plugins/velero-wasm ($(du -h "$work/bundle/rootfs/plugins/velero-wasm" | cut -f1))"

  config=$(skopeo inspect --config "oci:$work/layout:check")
  # One field a line: a label may be empty or hold spaces.
  { read -r user; read -r entrypoint; read -r label; read -r source; read -r arch; } < <(python3 -c '
import json, sys
c = json.load(sys.stdin)
cfg = c["config"]
labels = cfg.get("Labels") or {}
for value in (cfg.get("User"), json.dumps(cfg.get("Entrypoint"), separators=(",", ":")),
              labels.get("org.opencontainers.image.version"),
              labels.get("org.opencontainers.image.source"), c.get("architecture")):
    print("" if value is None else value)' <<<"$config")
  [ "$user" = "65532:65532" ] || fail "user is $user, not 65532:65532"
  [ "$entrypoint" = '["/plugins/velero-wasm","install-plugin","/target"]' ] || fail "entrypoint is $entrypoint"
  [ "$label" = "$version" ] || fail "version label is $label, not $version"
  [ "$source" = "$source_url" ] || fail "source label is '$source', not $source_url"
  echo "ok    user 65532:65532, entrypoint install-plugin /target, version $version, source $source_url, $arch"

  # An image of another architecture runs under its user-mode emulator (Debian's qemu-user-static),
  # copied into the chroot beside the binary, since the image holds nothing else.
  emulator=() inside=()
  case "$arch:$here" in
    amd64:x86_64 | arm64:aarch64) ;;
    *)
      case "$arch" in amd64) qemu=qemu-x86_64-static ;; arm64) qemu=qemu-aarch64-static ;; esac
      if ! command -v "$qemu" >/dev/null; then
        echo "skip  running the entrypoint: a $arch image on $here, and no $qemu (apt-get install -y qemu-user-static)"
        rm -rf "$work"; trap - EXIT; continue
      fi
      cp "$(command -v "$qemu")" "$work/bundle/rootfs/emulator"
      emulator=("$(command -v "$qemu")") inside=(/emulator)
      ;;
  esac
  # Velero's init container: the plugins volume, empty, at /target; the image's user, no /proc, no shell.
  mkdir -m 0777 "$work/bundle/rootfs/target"
  chroot --userspec=65532:65532 "$work/bundle/rootfs" "${inside[@]}" /plugins/velero-wasm install-plugin /target
  installed=$work/bundle/rootfs/target/velero-wasm
  [ -x "$installed" ] || fail "the entrypoint installed no executable at /target/velero-wasm"
  expected=$("$dynamic" "${demo[@]}")
  actual=$("${emulator[@]}" "$installed" "${demo[@]}")
  [ "$actual" = "$expected" ] || fail "the installed binary's demo answer differs from the debug build's"
  echo "ok    the entrypoint installed a binary whose README demo answer equals the debug build's (${#actual} bytes${emulator:+, under $qemu})"
  rm -rf "$work"
  trap - EXIT
done
echo "image check: all passed"
