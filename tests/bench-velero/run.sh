#!/usr/bin/env bash
# `make bench-velero`: what velero-wasm costs a real Velero backup of many running VMs, against Velero
# alone, at a cluster's latency (issue 56). The cluster is `make e2e`'s (tests/e2e/lib.sh: etcd and
# kube-apiserver, moto's S3, Velero v1.18.3's server with its AWS plugin), plus:
#
#   - VMS running VMs (default 100) over 4 namespaces vms-0..3, and one more VM alone in vm-one-0,
#     each a copy of the fixture VM fedora-web-01 with what it has in a real cluster (its VMI,
#     virt-launcher and hotplug pods, DataVolume, PVCs and their PersistentVolumes, Secrets, the
#     ControllerRevisions of its instancetype and preference) made by vmgen from the fixture's objects;
#   - toxiproxy between every client and kube-apiserver (Velero's server and, through the KUBECONFIG
#     it inherits, every plugin process), its latency toxic adding LATENCIES ms (default "0 2") to
#     each response; the velero CLI that starts the backups goes to the API server directly;
#   - kube-apiserver's audit log (tests/bench-velero/audit-policy.yaml), which counts the requests of
#     Velero's server and of velero-wasm by user agent.
#
# Rows (ROWS, default all five): alone (Velero with the AWS plugin only: no item action for these
# namespaces), stock (velero-wasm as installed), kubevirt (velero-wasm with the kubevirt module only,
# VELERO_WASM_STOCK=kubevirt: without hcp's backup action, which applies to every item), upstream
# (the stock kubevirt in mode = "upstream", a module ConfigMap), noviews (VELERO_WASM_READ_VIEWS=off);
# each with `velero server
# --item-block-worker-count` WORKERS (default "1 4"), each at every latency, RUNS backups (default 3)
# of the VMS VMs and RUNS of the one VM, after one backup not measured (the first after a server
# start also fills velero-wasm's compile cache). tests/bench-velero/measure.py measures each backup
# and prints one line a row and a Markdown table at the end; the machine and the binary come first.
#
#   VMS=100 RUNS=3 tests/bench-velero/run.sh        BINARY=path  the velero-wasm binary (default the
#                                                   musl release build, else the musl debug build)
#
# Every process it starts is stopped on every exit; work files and logs stay in target/bench-velero/run/
# (results.jsonl: one JSON line a backup; velero-server.log; kube/audit.log*).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

tool=bench-velero
VMS=${VMS:-100}
RUNS=${RUNS:-3}
LATENCIES=${LATENCIES:-0 2}
WORKERS=${WORKERS:-1 4}
ROWS=${ROWS:-alone stock kubevirt upstream noviews}
NAMESPACES=4

out=$root/target/e2e
bin=$out/bin
bench=$root/target/bench-velero
run=$bench/run
fixture=$root/tests/fixtures/kubevirt
export PATH=/usr/local/go/bin:$PATH
target=$(uname -m)-unknown-linux-musl
if [ -n "${BINARY:-}" ]; then
  velero_wasm=$BINARY
elif [ -x "$root/target/$target/release/velero-wasm" ]; then
  velero_wasm=$root/target/$target/release/velero-wasm
else
  velero_wasm=$root/target/$target/debug/velero-wasm
fi
pids=()
kube_started=""
toxiproxy_api=""

# Stops what this run started, in reverse order, whatever the exit path.
on_exit() {
  local status=$?
  if declare -F stop_started >/dev/null; then stop_started; fi
  [ "$status" -eq 0 ] || echo "$tool: failed (exit $status); logs in $run (velero-server.log, backups.log, kube/)" >&2
  exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# shellcheck source=tests/e2e/lib.sh
. tests/e2e/lib.sh
# The CLI under another name (a link build makes): client-go's user agent is the command's name, so
# the audit log tells the CLI's requests from the server's.
velero() { "$bench/bin/velero-cli" --namespace velero "$@"; }

case "$VMS$RUNS" in *[!0-9]*) fail "VMS and RUNS are whole numbers (VMS=$VMS RUNS=$RUNS)" ;; esac
[ "$VMS" -ge 1 ] && [ "$RUNS" -ge 1 ] || fail "VMS and RUNS are at least 1"
for row in $ROWS; do
  case $row in alone | stock | kubevirt | upstream | noviews) ;; *) fail "unknown row $row in ROWS (alone stock kubevirt upstream noviews)" ;; esac
done

row_name() {
  case $1 in
  alone) echo "Velero alone" ;;
  stock) echo "velero-wasm stock" ;;
  kubevirt) echo "velero-wasm kubevirt module only" ;;
  upstream) echo "velero-wasm kubevirt upstream mode" ;;
  noviews) echo "velero-wasm read views off" ;;
  esac
}

machine() {
  local model cpus
  model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  cpus=$(nproc)
  echo "machine: ${model:-unknown CPU}, $cpus CPUs, $(awk '{printf "%.1f GiB", $2 / 1048576}' <(grep MemTotal /proc/meminfo)) RAM, Linux $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# ---------------------------------------------------------------------------------------- build
build() {
  tests/e2e/build.sh
  [ -n "${KUBE_APISERVER:-}" ] || tests/kube/build.sh
  tests/bench-velero/build.sh
  [ -x "$velero_wasm" ] || fail "no $velero_wasm: build it first (cargo build --release --target $target -p velero-wasm, or make e2e's test build)"
  [ -x "$out/venv/bin/moto_server" ] || fail "no moto server in $out/venv: run .ci/deps e2e"
  mkdir -p "$bench/velero-wasm"
  cp "$velero_wasm" "$bench/velero-wasm/velero-wasm"
  profile=$(basename "$(dirname "$velero_wasm")")
  velero_wasm=$bench/velero-wasm/velero-wasm
  ln -sf "$bin/velero" "$bench/bin/velero-cli"
}

# ------------------------------------------------------------------------------------- latency
# toxiproxy in front of kube-apiserver; velero_kubeconfig names it.
latency_proxy() {
  local api_port proxy_port server upstream
  api_port=$(free_port)
  LOG_LEVEL=warn "$bench/bin/toxiproxy-server" -host 127.0.0.1 -port "$api_port" >"$run/toxiproxy.log" 2>&1 &
  pids+=($!)
  toxiproxy_api=http://127.0.0.1:$api_port
  wait_for 30 curl -sf "$toxiproxy_api/version" || fail "toxiproxy did not answer on $toxiproxy_api ($run/toxiproxy.log)"
  server=$(jq -r .server "$run/kube/server.json")
  upstream=${server#https://}
  proxy_port=$(free_port)
  curl -sf -X POST "$toxiproxy_api/proxies" \
    -d "{\"name\":\"kube\",\"listen\":\"127.0.0.1:$proxy_port\",\"upstream\":\"$upstream\",\"enabled\":true}" >/dev/null ||
    fail "toxiproxy refused the proxy to $upstream ($run/toxiproxy.log)"
  proxy_url=https://127.0.0.1:$proxy_port
  velero_kubeconfig=$run/proxied.kubeconfig
  sed "s|server: $server|server: https://127.0.0.1:$proxy_port|" "$KUBECONFIG" >"$velero_kubeconfig"
  KUBECONFIG=$velero_kubeconfig "$bin/kubeobj" list namespaces "" >/dev/null || fail "kube-apiserver does not answer through toxiproxy"
  echo "toxiproxy: 127.0.0.1:$proxy_port -> $upstream"
}

set_latency() {
  curl -s -X DELETE "$toxiproxy_api/proxies/kube/toxics/latency" >/dev/null || true
  [ "$1" = 0 ] && return 0
  curl -sf -X POST "$toxiproxy_api/proxies/kube/toxics" \
    -d "{\"name\":\"latency\",\"type\":\"latency\",\"stream\":\"downstream\",\"toxicity\":1.0,\"attributes\":{\"latency\":$1,\"jitter\":0}}" >/dev/null ||
    fail "toxiproxy refused a latency of $1 ms"
}

# What a request through the proxy takes now: the median of 20 GETs of /readyz on one connection.
check_latency() {
  local pki=$run/kube/pki urls=() i
  for ((i = 0; i < 21; i++)); do urls+=(-o /dev/null "$proxy_url/readyz"); done
  curl -s --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    -w '%{time_total}\n' "${urls[@]}" | tail -n +2 | sort -n | awk '{t[NR] = $1} END {printf "%.1f", t[int((NR + 1) / 2)] * 1000}'
}

# ------------------------------------------------------------------------------------- objects
# The template VM's objects (as scale.rs picks them: every fixture object of vm-workloads naming
# fedora-web-01, and the two PVCs it mounts; not its VolumeSnapshot), its PVCs' PersistentVolumes,
# and what each namespace needs once; vmgen copies them.
vms() {
  local templates=$run/templates f name
  mkdir -p "$templates/per-vm" "$templates/per-namespace"
  for f in "$run"/cluster/*.json; do
    name=$(jq -r .metadata.name "$f")
    case "$(basename "$f")" in volumesnapshot-*) continue ;; esac
    if grep -q fedora-web-01 "$f" || [ "$name" = web-content ] || [ "$name" = web-logs ]; then
      cp "$f" "$templates/per-vm/"
    fi
  done
  for f in "$templates"/per-vm/pvc-*.json; do
    name=$(jq -r .spec.volumeName "$f")
    kubeobj get persistentvolumes "" "$name" >"$templates/per-vm/pv-$name.json"
  done
  printf '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"vm-workloads"}}\n' >"$templates/per-namespace/00-namespace.json"
  printf '{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default","namespace":"vm-workloads"}}\n' >"$templates/per-namespace/serviceaccount-default.json"
  cp "$run"/cluster/nad-storage-vlan200.json "$run"/cluster/configmap-web-frontend-config.json \
    "$run"/cluster/serviceaccount-web-frontend.json "$templates/per-namespace/"
  kubeobj get virtualmachinepreferences.instancetype.kubevirt.io vm-workloads fedora-secure >"$templates/per-namespace/preference-fedora-secure.json"
  "$bench/bin/vmgen" -per-vm "$templates/per-vm" -per-namespace "$templates/per-namespace" \
    -vms "$VMS" -namespaces "$NAMESPACES" -prefix vms -out "$run/generated"
  "$bench/bin/vmgen" -per-vm "$templates/per-vm" -per-namespace "$templates/per-namespace" \
    -vms 1 -namespaces 1 -prefix vm-one -out "$run/one"
  local start=$SECONDS
  # The namespaces and their shared objects first, then the VMs, four clients at once.
  kubeobj apply "$run"/generated/0-*.json "$run"/one/0-*.json
  find "$run/generated" "$run/one" -name '1-*.json' -print0 | sort -z | xargs -0 -n 200 -P 4 "$bin/kubeobj" apply
  echo "objects: $(ls "$run"/generated | wc -l) for $VMS VMs in $NAMESPACES namespaces, $(ls "$run"/one | wc -l) for the one VM, created in $((SECONDS - start)) s"
}

# ------------------------------------------------------------------------------------- the rows
configure() {
  local row=$1
  velero_server_env=()
  rm -f "$run/plugins/velero-wasm"
  [ "$row" = alone ] || cp "$velero_wasm" "$run/plugins/velero-wasm"
  kubeobj delete configmaps velero velero-wasm-module-kubevirt >/dev/null 2>&1 || true
  case $row in
  upstream) kubeobj apply "$run/kubevirt-upstream.yaml" ;;
  kubevirt) velero_server_env=(VELERO_WASM_STOCK=kubevirt) ;;
  noviews) velero_server_env=(VELERO_WASM_READ_VIEWS=off) ;;
  esac
}

backups=0
server_deaths=0
measure() {
  local row=$1 workers=$2 latency=$3 scope=$4 namespaces=$5 i
  for ((i = 1; i <= RUNS; i++)); do
    backups=$((backups + 1))
    local name=bench-$backups-$row-w$workers-l$latency-$scope
    sleep 2
    local status=0
    python3 tests/bench-velero/measure.py backup --row "$(row_name "$row")" --latency "$latency" \
      --workers "$workers" --scope "$scope" --name "${name,,}" --namespaces "$namespaces" \
      --cli "$bench/bin/velero-cli" --velero-pid "$velero_pid" --plugin "$run/plugins/velero-wasm" \
      --audit "$run/kube/audit.log" --log "$run/backups.log" >"$run/last.json" || status=$?
    cat "$run/last.json"
    cat "$run/last.json" >>"$run/results.jsonl"
    case $status in
    0) ;;
    3) # The server died (measure.py said why and stopped its plugins): a new one for the next run.
      server_deaths=$((server_deaths + 1))
      start_velero ;;
    *) fail "measuring backup ${name,,} failed (exit $status)" ;;
    esac
  done
}

main() {
  echo "$tool: VMS=$VMS RUNS=$RUNS LATENCIES=\"$LATENCIES\" WORKERS=\"$WORKERS\" ROWS=\"$ROWS\""
  machine
  build
  echo "velero-wasm: $velero_wasm ($profile build of $(git log -1 --format=%h))"
  # The Velero CLI keeps its config under HOME: a HOME of our own leaves the user's alone (after the
  # Go builds, whose cache is the machine's).
  export HOME=$run/home
  kube_apiserver_args=(--audit-policy-file "$root/tests/bench-velero/audit-policy.yaml"
    --audit-log-path "$run/kube/audit.log" --audit-log-format json --audit-log-mode batch
    --audit-log-maxsize 200 --audit-log-maxbackup 5)
  cluster
  latency_proxy
  objects
  vms
  mkdir -p "$run/kubevirt-upstream"
  printf '[settings]\nmode = "upstream"\n' >"$run/kubevirt-upstream/kubevirt.toml"
  "$velero_wasm" module pack "$run/kubevirt-upstream" --out "$run/kubevirt-upstream.yaml"
  grep -q 'name: velero-wasm-module-kubevirt$' "$run/kubevirt-upstream.yaml" ||
    fail "module pack named the kubevirt override otherwise than velero-wasm-module-kubevirt ($run/kubevirt-upstream.yaml)"
  local big one row workers latency
  big=$(seq -s, -f "vms-%g" 0 $((NAMESPACES - 1)))
  one=vm-one-0
  : >"$run/results.jsonl"
  for row in $ROWS; do
    for workers in $WORKERS; do
      configure "$row"
      velero_server_args=(--item-block-worker-count "$workers" --store-validation-frequency 1m)
      echo "=== $(row_name "$row"), $workers item-block workers"
      start_velero
      # One backup first, not measured: a new server's first backup also starts what every later one
      # finds ready (velero-wasm compiles its modules into the compile cache under the scratch
      # directory once; Velero's discovery and informers warm up).
      set_latency 0
      velero backup create "warm-$row-w$workers" --include-namespaces "$one" --snapshot-volumes=false --wait >>"$run/backups.log" 2>&1 ||
        fail "the warm-up backup warm-$row-w$workers failed ($run/backups.log)"
      for latency in $LATENCIES; do
        set_latency "$latency"
        echo "latency $latency ms: a GET of /readyz through toxiproxy takes $(check_latency) ms (median of 20)"
        measure "$row" "$workers" "$latency" "$VMS-VMs" "$big"
        measure "$row" "$workers" "$latency" 1-VM "$one"
      done
    done
  done
  echo
  echo "$tool: $VMS VMs in $NAMESPACES namespaces (and 1 VM alone), $RUNS runs a row; velero-wasm $profile build of $(git log -1 --format=%h)"
  [ "$server_deaths" = 0 ] || echo "$tool: the Velero server died $server_deaths times during a backup (result=VeleroServerDied; its stack in $run/velero-server.log)"
  machine
  python3 tests/bench-velero/measure.py summary "$run/results.jsonl"
}

main
