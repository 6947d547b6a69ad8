#!/usr/bin/env bash
# `make static`: conformance item C22 — the plugin binary is statically linked and runs in a container
# with nothing else in it (Velero's image has no shell). Takes the musl build that `make test` builds
# and runs every test against (target/<arch>-unknown-linux-musl/debug/velero-wasm; `make static` builds
# it first), checks that it is static, then, in an empty chroot holding only the binary, the test
# modules and fixtures: runs the README demo (its answer must equal the same binary's outside the
# root) and drives the plugin with Velero's own plugin client of `make velero` (tests/velero/).
# Everything it makes goes to target/static/.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
target=$(uname -m)-unknown-linux-musl
out=$root/target/static
client=$root/target/velero/velero-driver
components=$root/target/wasm/wasm32-wasip2/component
binary=$root/target/$target/debug/velero-wasm

for tool in musl-gcc chroot file; do
  command -v "$tool" >/dev/null || { echo "static: $tool is missing; install: apt-get install -y musl-tools coreutils file" >&2; exit 1; }
done
[ -x "$binary" ] || { echo "static: $binary is missing: run make static (it builds it)" >&2; exit 1; }
[ -x "$client" ] || { echo "static: run make velero first (it builds Velero's plugin client)" >&2; exit 1; }

echo "--- statically linked"
description=$(file -b "$binary")
echo "$description"
case "$description" in
  *"statically linked"* | *"static-pie linked"*) ;;
  *) echo "static: FAIL: $binary is not statically linked" >&2; exit 1 ;;
esac
if ldd "$binary" >/dev/null 2>&1 && ! ldd "$binary" 2>&1 | grep -q "statically linked"; then
  echo "static: FAIL: ldd lists shared libraries:" >&2; ldd "$binary" >&2; exit 1
fi

# The image: the binary and what the checks read, at the paths they have outside, and nothing else —
# no shell, no libc, no /etc, no CA certificates. Only /tmp, as every container has.
image=$out/root
rm -rf "$out" && mkdir -p "$image/tmp" "$image$out" "$image/fixtures"
cp "$binary" "$image$out/velero-wasm"
cp -r "$root/tests/fixtures/kubevirt" "$image/fixtures/"

if ! chroot "$image" "$out/velero-wasm" --version >/dev/null 2>"$out/chroot.err"; then
  if grep -qi "operation not permitted" "$out/chroot.err"; then
    echo "static: the binary is static; the chroot checks need root (CAP_SYS_CHROOT) and are skipped here"
    exit 0
  fi
  echo "static: FAIL: the binary does not start in an empty root:" >&2; cat "$out/chroot.err" >&2; exit 1
fi

echo "--- the README demo in the empty root"
demo=(run --action kubevirt-velero-plugin/backup-virtualmachine-action)
chroot "$image" "$out/velero-wasm" "${demo[@]}" --item /fixtures/kubevirt/cluster/vm-fedora-web-01.json \
  --backup /fixtures/kubevirt/velero/backup-nightly.json --cluster /fixtures/kubevirt/cluster > "$out/demo-static.json"
"$binary" "${demo[@]}" --item tests/fixtures/kubevirt/cluster/vm-fedora-web-01.json \
  --backup tests/fixtures/kubevirt/velero/backup-nightly.json --cluster tests/fixtures/kubevirt/cluster > "$out/demo-outside.json"
cmp "$out/demo-static.json" "$out/demo-outside.json" || { echo "static: FAIL: in the empty root the binary answers differently" >&2; exit 1; }
echo "same answer as outside the empty root ($(wc -c < "$out/demo-static.json") bytes)"

echo "--- Velero's plugin client against the plugin in the empty root"
# Velero starts the copy of $out/velero-wasm in its plugin directory: outside, a launcher that enters
# the root and runs the binary under that same path (so argv[0], the command the plugin reports, is a
# path Velero can start again). The driver's scratch directory (modules, state, sockets) lives in the
# root and is reached outside through a symbolic link at the same path, so a path the plugin reports
# means the same file on both sides; the launcher strips the root from the paths Velero passes on.
work=$out/work
mkdir -p "$image$work"
ln -s "$image$work" "$work"
cat > "$out/velero-wasm" <<LAUNCHER
#!/bin/sh
VELERO_WASM_MODULES=\${VELERO_WASM_MODULES#$image} VELERO_WASM_STATE_DIR=\${VELERO_WASM_STATE_DIR#$image} \\
PLUGIN_UNIX_SOCKET_DIR=\${PLUGIN_UNIX_SOCKET_DIR#$image} exec $(command -v chroot) $image $out/velero-wasm "\$@"
LAUNCHER
chmod +x "$out/velero-wasm"
# Every scenario but the shadow one, which reads `velero-wasm status` from outside the root.
"$client" -binary "$out/velero-wasm" -command "$out/velero-wasm" -components "$components" -work "$image$work" \
  -only backup,restore,delete,serving-failure,killed
