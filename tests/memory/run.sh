#!/usr/bin/env bash
# `make memory`: the host against an API server whose answers never end, inside a 512 MiB memory
# cgroup (v1 or v2; needs root; the limit `velero install` gives Velero's container, which the plugin
# shares with Velero's server), one row per attack: exit status, peak memory of the cgroup, time, and
# the last line the command printed. Every answer the host reads is bounded (docs/modules.md §2),
# so each row must end with a clear error well under the limit, never an OOM kill (exit 137).
#
#   get        a granted GET answered with an endless 200 body (kubevirt's VM backup, `run`)
#   error      the same GET answered with an endless 500 body
#   discovery  an endless /api/v1 while module ConfigMaps are listed at start (`actions`)
#   read-all   one kube.read-all of 64 gets, each answered with a 15 MiB ConfigMap, for a module of
#              64 MiB (the test component kube-probe; `run`): the answers are charged to the module's
#              memory as they arrive, so the call stops near 64 MiB of answers (it held 1 GiB before)
#   diff       `diff` of a 160 KiB archive of five 7.5 MiB items of [0,0,…] (35 million values once
#              parsed): refused at the first, whose parse alone passes diff's 160 MiB for items
#   dense      `diff` of a 24 KiB archive of three 8 MiB items, of [0,0,…], ["",""…] and [{},{}…]
#              (issue 55: killed in 1 GiB): refused at the first with the bound, and no temporary
#              directory left in its TMPDIR
#   long-name, long-link, pax
#              `diff` of a 14 MB archive whose one tar entry (GNU long name L, long link K, PAX x) holds
#              3 GiB of `a`: refused by the extension-header bound, with its message, before anything is
#              read into memory (a tar reader that takes the header's word holds all 3 GiB)
#   concurrent-gets
#              Velero's own plugin client (tests/velero's driver, `-only concurrent-gets`) sends 64
#              Executes at once through one plugin process, each of kube-probe's kube-get: one `get`
#              answered with a 15 MiB ConfigMap, for a module of 64 MiB (issue 55: killed in 1 GiB in
#              3–6 s). The process's budget charges what each answer holds until the guest has it, so
#              calls past it fail alone with its message (on busy cores some run out of their minute
#              instead), the others read 15 MiB, and no call fails otherwise (the driver checks all
#              three); read views off (each get goes to the API server)
#   concurrent-gets-views
#              the same with read views on: the first get lists the namespace (one ConfigMap of 15 MiB)
#              into the backup's view, which answers the 64 gets
#   shadow     Velero's own plugin client (tests/velero's driver, `-only big-shadow`) backs up four
#              items through misbehave while its shadow answers each with a 60 MB item of [0,0,…]
#              (within the 64 MiB output limit): compared by hash past the parsed-size bound, each
#              differs, Velero counts nothing (exit 0 and `N passed, 0 failed`, or the run fails)
#   js-cold    the plugin, started as Velero starts it, with ten 12 MB JavaScript modules
#              (componentize-js from npm, built here once, the action renamed in place) and an empty
#              compile cache, under the compile budget its cgroup leaves by default (three quarters
#              of 512 MiB less 256 MiB: 128 MiB): each is refused for what its compile would take
#              (about 470 MiB),
#              never compiled, and the stock modules compile and serve (issue 55: ten compiling
#              killed the plugin at 512 MiB in 22 s)
set -euo pipefail
cd "$(dirname "$0")/../.."
BINARY=${BINARY:-$PWD/target/$(uname -m)-unknown-linux-musl/debug/velero-wasm}
FIX=$PWD/tests/fixtures/kubevirt
LIMIT=$((512 << 20))
[ -x "$BINARY" ] || { echo "memory: no binary at $BINARY (make velero builds it)"; exit 2; }

if [ -d /sys/fs/cgroup/memory ]; then
  CG=/sys/fs/cgroup/memory/velero-wasm-memory-$$
  mkdir "$CG"; echo $LIMIT > "$CG/memory.limit_in_bytes"
  peak() { echo $(( $(cat "$CG/memory.max_usage_in_bytes") >> 20 )); }
  reset() { echo 0 > "$CG/memory.max_usage_in_bytes"; }
else
  CG=/sys/fs/cgroup/velero-wasm-memory-$$
  mkdir "$CG"; echo $LIMIT > "$CG/memory.max"
  peak() { echo $(( $(cat "$CG/memory.peak") >> 20 )); }
  reset() { :; }
fi
work=$(mktemp -d)
# Under set -e a failing command ends the trap too: each step may fail (the server already gone).
trap 'kill $server 2>/dev/null || true; rmdir "$CG" 2>/dev/null || true; rm -rf "$work"' EXIT
server=
port=$((20000 + RANDOM % 20000))

# The driver of the concurrent-gets and shadow rows: Velero's plugin client, built with Go
# (tests/velero/build.sh).
tests/velero/build.sh >&2
DRIVER=$PWD/target/velero/velero-driver
COMPONENTS=$PWD/target/wasm/wasm32-wasip2/component

echo "machine: $(nproc) cores, $(uname -m); binary: $BINARY; cgroup limit $((LIMIT >> 20)) MiB"
printf '| attack | exit | peak memory | time | last line |\n|---|---|---|---|---|\n'
PROBE=${PROBE:-$PWD/target/wasm/wasm32-wasip2/component/kube_probe.wasm}
[ -f "$PROBE" ] || { echo "memory: no kube-probe component at $PROBE (make velero builds it)"; exit 2; }
mkdir -p "$work/probe"
cp "$PROBE" "$work/probe/kube-probe.wasm"
cat > "$work/probe/kube-probe.toml" <<M
sha256 = "$(sha256sum "$PROBE" | cut -d' ' -f1)"
[limits]
memory = "64MiB"
[[grant.kube]]
resources = ["configmaps"]
verbs = ["get"]
namespaces = ["@item"]
[settings]
reads = "64"
M
echo '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"item","namespace":"velero"}}' > "$work/item.json"
python3 - "$work/zeros.tar.gz" <<'Z'
import io, json, sys, tarfile
zeros = ",".join(["0"] * 3_900_000)
with tarfile.open(sys.argv[1], "w:gz") as tar:
    def add(name, data):
        info = tarfile.TarInfo(name); info.size = len(data); tar.addfile(info, io.BytesIO(data))
    add("metadata/version", b"1.1.0\n")
    for i in range(5):
        item = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"zeros-%d","namespace":"apps"},"zeros":[%s]}' % (i, zeros)
        add("resources/configmaps/namespaces/apps/zeros-%d.json" % i, item.encode())
Z
python3 - "$work/dense.tar.gz" <<'D'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w:gz") as tar:
    def add(name, data):
        info = tarfile.TarInfo(name); info.size = len(data); tar.addfile(info, io.BytesIO(data))
    add("metadata/version", b"1.1.0\n")
    for i, element in enumerate(["0", '""', "{}"]):
        head = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dense-%d","namespace":"apps"},"dense":[' % i
        n = ((8 << 20) - len(head) - 2) // (len(element) + 1)
        add("resources/configmaps/namespaces/apps/dense-%d.json" % i, (head + ",".join([element] * n) + "]}").encode())
D
mkdir -p "$work/diff-tmp"
# One tar header of each extension kind followed by the 3 GiB it says it has, gzipped: the 3 GiB is
# compressed once (14 MB at level 1) as a gzip member of its own, which each archive's member with the
# header precedes (a gzip file of several members is read whole, as Go's reader and so Velero read it).
python3 - "$work" <<'H'
import gzip, shutil, sys, zlib
def header(name, typeflag, size):
    h = bytearray(512)
    h[0:len(name)] = name.encode()
    for at, field in ((100, b"0000644\0"), (108, b"0000000\0"), (116, b"0000000\0"), (136, b"00000000000\0")):
        h[at:at + len(field)] = field
    h[124:136] = b"%011o\0" % size
    h[148:156] = b" " * 8
    h[156:157] = typeflag
    h[257:265] = b"ustar  \0"
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)
body = "%s/3gib-of-a.gz" % sys.argv[1]
with open(body, "wb") as f:
    deflate, chunk = zlib.compressobj(1, zlib.DEFLATED, 31), b"a" * (1 << 20)
    for _ in range(3 << 10):
        f.write(deflate.compress(chunk))
    f.write(deflate.flush())
for flag, mode in ((b"L", "long-name"), (b"K", "long-link"), (b"x", "pax")):
    with open("%s/%s.tar.gz" % (sys.argv[1], mode), "wb") as f:
        f.write(gzip.compress(header("././@LongLink", flag, 3 << 30)))
        with open(body, "rb") as b:
            shutil.copyfileobj(b, f)
H

# row MODE CMD: runs CMD inside the cgroup and prints its row; the run fails when the host was killed
# at the limit. Sets $status and $out (what CMD printed on stderr).
row() {
  local mode=$1 cmd=$2 start took said
  reset
  start=$(date +%s%N)
  status=0
  out=$(sh -c "echo \$\$ > $CG/cgroup.procs; exec env KUBECONFIG=$work/kubeconfig $cmd" 2>&1 >/dev/null) || status=$?
  took=$(( ($(date +%s%N) - start) / 1000000 ))
  said=$(printf '%s\n' "$out" | { grep -v '^\s*$' || true; } | tail -1 | cut -c1-140 | tr '|' '/')
  printf '| %s | %s | %s MiB | %d ms | %s |\n' "$mode" "$status" "$(peak)" "$took" "$said"
  [ "$status" -ne 137 ] || { echo "memory: $mode: the host was killed at the memory limit"; exit 1; }
}

for mode in get error discovery read-all concurrent-gets concurrent-gets-views diff; do
  case $mode in read-all | concurrent-gets*) serves=big-gets ;; *) serves=$mode ;; esac
  python3 tests/memory/hostile_apiserver.py "$serves" "$port" & server=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  cat > "$work/kubeconfig" <<K
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:$port"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: velero}}]
current-context: c
K
  if [ "$mode" = discovery ]; then
    mkdir -p -m 700 "$work/state"
    cmd="VELERO_WASM_CONFIGMAPS=on VELERO_WASM_STATE_DIR=$work/state VELERO_NAMESPACE= $BINARY actions"
  elif [ "$mode" = read-all ]; then
    cmd="$BINARY run --modules $work/probe --stock none --action test.velero-wasm.io/kube-read-all --item $work/item.json --backup $FIX/velero/backup-nightly.json"
  elif [ "${mode%-views}" = concurrent-gets ]; then
    # The driver's checks, on stdout, go to stderr: the row's last line is its `N passed, N failed`.
    cmd="$DRIVER -binary $BINARY -components $COMPONENTS -work $work/velero -only $mode -gets-kubeconfig $work/kubeconfig 1>&2"
  elif [ "$mode" = diff ]; then
    cmd="$BINARY diff $work/zeros.tar.gz --new stock"
  else
    cmd="$BINARY run --action kubevirt-velero-plugin/backup-virtualmachine-action --item $FIX/cluster/vm-fedora-web-01.json --backup $FIX/velero/backup-nightly.json"
  fi
  row "$mode" "$cmd"
  kill $server; wait $server 2>/dev/null || true
  if [ "${mode%-views}" = concurrent-gets ] && [ "$status" -ne 0 ]; then
    printf '%s\n' "$out" | grep '^FAIL' >&2 || true
    echo "memory: $mode: the driver's checks failed"
    exit 1
  fi
done

row dense "TMPDIR=$work/diff-tmp $BINARY diff $work/dense.tar.gz --new stock"
[ "$status" -eq 2 ] || { echo "memory: dense: diff should refuse the archive (exit 2), it ended with $status"; exit 1; }
case $out in
  *"dense-0.json: the items up to this one would take"*"over the 160 MiB diff takes for a backup's items"*) ;;
  *) echo "memory: dense: diff did not refuse the first item for the memory it takes: $out"; exit 1 ;;
esac
[ -z "$(ls -A "$work/diff-tmp")" ] || { echo "memory: dense: diff left $(ls -A "$work/diff-tmp") in its TMPDIR"; exit 1; }

for mode in long-name long-link pax; do
  row "$mode" "$BINARY diff $work/$mode.tar.gz --new stock"
  [ "$status" -eq 2 ] || { echo "memory: $mode: diff should refuse the archive (exit 2), it ended with $status"; exit 1; }
  case $out in
    *"header of 3221225472 bytes, over the 65536-byte limit of one: not read"*) ;;
    *) echo "memory: $mode: diff did not refuse the header for its size: $out"; exit 1 ;;
  esac
done

# js-cold: the plugin (started as Velero starts it) with ten cold JavaScript modules; see the list above.
JS_VERSION=0.23.0 NPM_DIR=$PWD/target/javascript-npm  # host/src/cli/new.rs, COMPONENTIZE_JS_VERSION
grep -qs "\"version\": \"$JS_VERSION\"" "$NPM_DIR/node_modules/@bytecodealliance/componentize-js/package.json" || { mkdir -p "$NPM_DIR"; [ -f "$NPM_DIR/package.json" ] || echo '{"private": true}' > "$NPM_DIR/package.json"; (cd "$NPM_DIR" && npm install --no-audit --no-fund --save-exact "@bytecodealliance/componentize-js@$JS_VERSION") >&2; }
"$BINARY" new --lang javascript --kind backup "$work/js/js-cold" >/dev/null
(cd "$work/js/js-cold" && "$NPM_DIR/node_modules/.bin/componentize-js" app.js --wit wit --world-name plugin --disable http fetch-event --out js-cold.wasm) >&2
mkdir -p -m 700 "$work/js-modules" "$work/js-state"
python3 - "$work/js/js-cold" "$work/js-modules" <<'J'
import hashlib, re, sys
wasm, manifest = open(sys.argv[1] + "/js-cold.wasm", "rb").read(), open(sys.argv[1] + "/js-cold.toml").read()
for i in range(10):  # ten modules of other bytes and another action each: the name, same length, in place
    b = wasm.replace(b"example.io/js-cold", b"example.io/js-col%d" % i)
    open("%s/js-%d.wasm" % (sys.argv[2], i), "wb").write(b)
    m = re.sub(r"(?m)^sha256 = .*\n", "", manifest)
    open("%s/js-%d.toml" % (sys.argv[2], i), "w").write('sha256 = "%s"\n%s' % (hashlib.sha256(b).hexdigest(), m))
J
cat > "$work/js-plugin.sh" <<P
#!/bin/sh
"$BINARY" --log-level debug >/dev/null 2>"$work/js-plugin.log" & pid=\$!
for _ in \$(seq 1200); do grep -q '"modules compiled"' "$work/js-plugin.log" && break; kill -0 \$pid 2>/dev/null || break; sleep 0.5; done
kill \$pid 2>/dev/null; wait \$pid; status=\$?
grep -q '"modules compiled"' "$work/js-plugin.log" || exit \$status
echo "\$(grep -c 'too big to compile within the compile memory budget' "$work/js-plugin.log") refusals for the compile budget; \$(grep -o '"compiled_ms":"[0-9]*"' "$work/js-plugin.log")" >&2
P
chmod +x "$work/js-plugin.sh"
row js-cold "VELERO_PLUGIN=hello PLUGIN_PROTOCOL_VERSIONS=2 VELERO_WASM_MODULES=$work/js-modules VELERO_WASM_STATE_DIR=$work/js-state VELERO_WASM_CONFIGMAPS=off $work/js-plugin.sh"
for i in $(seq 0 9); do grep -q "module js-$i .*too big to compile within the compile memory budget" "$work/js-plugin.log" || { echo "memory: js-cold: module js-$i was not refused for its compile: $(tail -c 600 "$work/js-plugin.log")"; exit 1; }; done

# The driver serves the module ConfigMaps itself (its scenario sets KUBECONFIG); its checks, on
# stdout, go to stderr so that the row's last line is its `N passed, N failed`.
row shadow "$DRIVER -binary $BINARY -components $COMPONENTS -work $work/velero -only big-shadow 1>&2"
if [ "$status" -ne 0 ]; then
  printf '%s\n' "$out" | grep '^FAIL' >&2 || true
  echo "memory: shadow: the driver's checks failed"
  exit 1
fi
