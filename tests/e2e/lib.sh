# The set-up `make e2e` (tests/e2e/run.sh) and `make bench-velero` (tests/bench-velero/run.sh)
# share: the API server, S3, Velero's CRDs and BSL, the plugin directory, `velero server`, the
# KubeVirt fixture namespace as real objects. Sourced, not run. The caller sets, before calling:
#
#   root          the repository            out, run, bin  target/e2e, its work directory, the Go binaries
#   fixture       tests/fixtures/kubevirt   velero_wasm    the plugin binary to install
#   pids          an array: every process started here is added to it, for stop_started
#
# and may set:
#
#   kube_apiserver_args   an array of extra kube-apiserver flags (tests/kube/start.sh's KUBE_APISERVER_ARGS)
#   velero_kubeconfig     the kubeconfig `velero server` (and so its plugins) use; default KUBECONFIG
#   velero_server_args    an array of extra `velero server` flags
#   velero_server_env     an array of extra NAME=VALUE for `velero server` and its plugins
#   velero_plugins        0: the plugin directory gets the AWS plugin only (no velero-wasm)
#
# It sets kube_started, KUBECONFIG (the admin's, straight to the API server), s3_port, velero_pid.
# Says what failed, prefixed by the tool's name ($tool, default e2e), and fails.
fail() {
  echo "${tool:-e2e}: $*" >&2
  return 1
}

# A free loopback TCP port.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

velero() { "$bin/velero" --namespace velero "$@"; }
kubeobj() { "$bin/kubeobj" "$@"; }

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local seconds=$1
  shift
  local until=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $until ] || return 1
    sleep 1
  done
}

# -------------------------------------------------------------------------------------- cluster
cluster() {
  rm -rf "$run"
  mkdir -p "$run/home" "$run/plugins" "$run/scratch"
  # The watchdog stops the API server should this script be killed without its EXIT trap.
  KUBE_WATCH_PID=$$ KUBE_APISERVER_ARGS="${kube_apiserver_args[*]:-}" tests/kube/start.sh "$run/kube"
  kube_started=1
  export KUBECONFIG=$run/kube/admin.kubeconfig
  [ -f "$KUBECONFIG" ] || fail "tests/kube/start.sh wrote no $KUBECONFIG"

  # S3: moto's server, a bucket for Velero.
  s3_port=$(free_port)
  "$out/venv/bin/moto_server" -H 127.0.0.1 -p "$s3_port" >"$run/moto.log" 2>&1 &
  pids+=($!)
  wait_for 30 curl -sf "http://127.0.0.1:$s3_port/" || fail "moto did not answer on port $s3_port ($run/moto.log)"
  curl -sf -X PUT "http://127.0.0.1:$s3_port/velero" >/dev/null || fail "cannot create the bucket"
  printf '[default]\naws_access_key_id = e2e\naws_secret_access_key = e2e-secret\n' >"$run/credentials"

  # Velero's CRDs as its own installer writes them, its namespace and the BSL.
  velero install --crds-only --dry-run -o yaml >"$run/velero-crds.yaml"
  kubeobj apply "$run/velero-crds.yaml"
  kubeobj wait-crds velero.io
  cat >"$run/velero.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: velero}
---
apiVersion: velero.io/v1
kind: BackupStorageLocation
metadata: {name: default, namespace: velero}
spec:
  provider: aws
  default: true
  objectStorage: {bucket: velero}
  config: {region: us-east-1, s3ForcePathStyle: "true", s3Url: "http://127.0.0.1:$s3_port"}
---
# The Deployment a real install has: Velero's pod-volume restore action reads its image when it is
# made (for every restore), and the restore fails without it. No controller runs it here.
apiVersion: apps/v1
kind: Deployment
metadata: {name: velero, namespace: velero}
spec:
  selector: {matchLabels: {component: velero}}
  template:
    metadata: {labels: {component: velero}}
    spec:
      containers: [{name: velero, image: "velero/velero:v1.18.3"}]
EOF
  kubeobj apply "$run/velero.yaml"

  # The plugin directory as the init containers leave it: the AWS plugin, and velero-wasm copied by
  # its own install-plugin (the image's entrypoint).
  cp "$bin/velero-plugin-for-aws" "$run/plugins/"
  [ "${velero_plugins:-1}" = 0 ] && return 0
  "$velero_wasm" install-plugin "$run/plugins"
  [ -x "$run/plugins/velero-wasm" ] || fail "install-plugin left no $run/plugins/velero-wasm"
}

# Starts `velero server` (stopping the one running, if any) and waits for its BSL to be Available.
# Velero reads the API's resources and the plugins' action lists when it starts: it must start after
# the CRDs exist, and again after module ConfigMaps add actions.
start_velero() {
  if [ -n "${velero_pid:-}" ]; then
    kill "$velero_pid" 2>/dev/null || true
    wait "$velero_pid" 2>/dev/null || true
    echo "velero server (pid $velero_pid) stopped"
  fi
  # As in the Velero pod: VELERO_NAMESPACE and VELERO_SCRATCH_DIR (velero-wasm's state directory is
  # under it); module ConfigMaps are read through KUBECONFIG (outside a pod, `auto` would not).
  env KUBECONFIG="${velero_kubeconfig:-$KUBECONFIG}" AWS_SHARED_CREDENTIALS_FILE=$run/credentials \
    VELERO_NAMESPACE=velero VELERO_SCRATCH_DIR=$run/scratch VELERO_WASM_CONFIGMAPS=on \
    ${velero_server_env[@]+"${velero_server_env[@]}"} \
    "$bin/velero" server --namespace velero --plugin-dir "$run/plugins" \
    --default-volumes-to-fs-backup=false --uploader-type=kopia \
    --metrics-address "127.0.0.1:$(free_port)" --profiler-address "127.0.0.1:$(free_port)" \
    --log-level info --store-validation-frequency 10s ${velero_server_args[@]+"${velero_server_args[@]}"} \
    >>"$run/velero-server.log" 2>&1 &
  velero_pid=$!
  pids+=("$velero_pid")
  local until=$((SECONDS + 120)) phase=""
  while [ $SECONDS -lt $until ]; do
    kill -0 "$velero_pid" 2>/dev/null || fail "velero server exited ($run/velero-server.log)"
    phase=$(velero backup-location get default -o json 2>/dev/null | jq -r '.status.phase // ""') || true
    [ "$phase" = Available ] && { echo "BackupStorageLocation default: Available"; return 0; }
    sleep 2
  done
  fail "BackupStorageLocation default is not Available after 120 s (phase \"$phase\")"
}

# -------------------------------------------------------------------------------------- objects
objects() {
  kubeobj apply tests/e2e/cluster/crds.yaml
  kubeobj wait-crds kubevirt.io instancetype.kubevirt.io cdi.kubevirt.io k8s.cni.cncf.io
  kubeobj apply tests/e2e/cluster/namespace.yaml
  # The fixture namespace as it is, but for rhel9-cache-02 (a VM whose VMI is gone: its backup action
  # fails by design) and the VolumeSnapshot (Velero's own CSI action needs its VolumeSnapshotContent,
  # which only a CSI driver makes). The pods lose Velero's hook annotations: with no kubelet, Velero's
  # pod exec of virt-freezer fails, an error in the backup (a finished pod's hooks are skipped, but
  # the kubevirt action wants the launcher pod of a running VMI Running, as it is).
  mkdir -p "$run/cluster"
  local f
  for f in "$fixture"/cluster/*.json; do
    case "$(basename "$f")" in
    vm-rhel9-cache-02.json | volumesnapshot-*.json) continue ;;
    pod-*.json) jq '.metadata.annotations |= ((. // {}) | with_entries(select(.key | test("hook\\.backup\\.velero\\.io/") | not)))' "$f" >"$run/cluster/$(basename "$f")" ;;
    *) cp "$f" "$run/cluster/" ;;
    esac
  done
  kubeobj apply tests/e2e/cluster/referenced.yaml "$run"/cluster/*.json
  echo "$(ls "$run"/cluster/*.json | wc -l) fixture objects and $(grep -c '^kind:' tests/e2e/cluster/referenced.yaml) referenced objects created"
}

# Stops every process in pids, newest first, and waits for each; then the API server, if started.
# For the caller's EXIT trap: nothing here fails.
stop_started() {
  local i pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[$i]}" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "$kube_started" ]; then tests/kube/stop.sh "$run/kube" >/dev/null 2>&1 || true; fi
}
