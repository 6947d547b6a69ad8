#!/usr/bin/env bash
# `make e2e`: a backup and a restore in real Velero, end to end, on this machine. Nothing runs in a
# container: etcd and kube-apiserver (tests/kube/start.sh), an S3 endpoint (moto's server), and the
# Velero server with velero-plugin-for-aws and velero-wasm in its plugin directory, all on loopback.
#
#   build     velero, velero-plugin-for-aws, kubeobj (tests/e2e/build.sh) and kube-apiserver
#   cluster   etcd + kube-apiserver, moto, Velero's CRDs and the BSL, the plugin directory
#   objects   our KubeVirt/CDI/Multus CRDs, the KubeVirt fixture namespace as real objects
#   velero    `velero server` with the AWS plugin and velero-wasm; its BSL Available
#   backup    `velero backup create` of vm-workloads: Completed, 0 errors, 0 warnings
#   archive   the archive Velero uploaded holds the VM and the additional items README promises
#   diff      `velero-wasm diff` on that archive: stock against stock (same), against upstream mode
#   restore   into vm-workloads-dr: Completed, and the restore actions' work on the restored objects
#   hotswap   a module adding a label to PVCs applied while the server runs: the next backup's
#             PVCs carry the label (through the slot, docs/modules.md#s10) and its ConfigMap says it
#             serves through the slot (an Event, the status annotation); one that cannot load says
#             Refused; deleted, the next backup's PVCs lack the label
#   shadow    a kubevirt shadow that differs and a misbehave shadow that traps: the backup is still
#             Completed with 0 errors and 0 warnings, `velero-wasm status` shows the comparison
#   hcp       the HyperShift fixture backed up the same way (E2E_HCP=0 leaves it out)
#
# The last line: `e2e: backup NAME Completed (errors N, warnings N), ITEMS items, archive PATH;
# restore NAME Completed (errors N, warnings N)`. Every process it starts is stopped on every exit.
# Work files and logs: target/e2e/run/ (kept after the run); the archive: target/e2e/NAME.tar.gz.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

out=$root/target/e2e
run=$out/run
bin=$out/bin
fixture=$root/tests/fixtures/kubevirt
export PATH=/usr/local/go/bin:$PATH
target=$(uname -m)-unknown-linux-musl
velero_wasm=${BINARY:-$root/target/$target/debug/velero-wasm}
components=$root/target/wasm/wasm32-wasip2/component
# The Go builds below use the machine's build and module caches (shared by every clone: a second
# clone builds Velero in seconds), which Go finds under HOME: keep them before HOME changes.
GOCACHE=$(go env GOCACHE) GOMODCACHE=$(go env GOMODCACHE)
export GOCACHE GOMODCACHE
# The Velero CLI keeps its config under HOME: a HOME of our own leaves the user's alone.
export HOME=$run/home
name=e2e-$(date -u +%Y%m%d-%H%M%S)
restore_name=$name-dr

summary=()
total_start=$SECONDS
pids=()
kube_started=""

human() {
  local s=$1
  if [ "$s" -ge 60 ]; then printf '%d min %02d s' $((s / 60)) $((s % 60)); else printf '%d s' "$s"; fi
}

report() {
  echo
  echo "stage            time  result"
  printf '%s\n' "${summary[@]}"
  printf '%-8s %12s\n' total "$(human $((SECONDS - total_start)))"
}

logs_hint() {
  echo "e2e: logs: velero server $run/velero-server.log (plugin lines are in it, as Velero logs them)," \
    "backup/restore logs $run/*.log, S3 $run/moto.log, API server $run/kube/" >&2
}

# Runs one stage under `set -e`: its first failing command ends the run, and the EXIT trap reports
# the stage as failed.
current_stage=""
stage_start=0
stage() {
  current_stage=$1
  shift
  echo "=== $current_stage"
  stage_start=$SECONDS
  "$@"
  record ok
  current_stage=""
}

record() {
  local took=$((SECONDS - stage_start))
  summary+=("$(printf '%-8s %12s  %s' "$current_stage" "$(human "$took")" "$1")")
  echo "=== $current_stage: $1 in $(human "$took")"
}

# Stops what this run started, in reverse order, whatever the exit path; reports a failed stage.
on_exit() {
  local status=$?
  if [ -n "$current_stage" ]; then
    record "FAILED (exit $status)"
    report
    logs_hint
  fi
  if declare -F stop_started >/dev/null; then stop_started; fi
  exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# fail, free_port, velero, kubeobj, wait_for; the stages cluster, objects and start_velero.
# shellcheck source=tests/e2e/lib.sh
. tests/e2e/lib.sh

# ---------------------------------------------------------------------------------------- build
build() {
  tests/e2e/build.sh
  # KUBE_APISERVER (tests/kube/start.sh's) names a kube-apiserver to use instead of building one.
  [ -n "${KUBE_APISERVER:-}" ] || tests/kube/build.sh
  [ -x "$velero_wasm" ] || fail "no $velero_wasm: run the test build first (make e2e does)"
  # One copy of the binary for the whole run, whatever rebuilds the original meanwhile.
  mkdir -p "$out/velero-wasm"
  cp "$velero_wasm" "$out/velero-wasm/velero-wasm"
  velero_wasm=$out/velero-wasm/velero-wasm
  [ -f "$components/misbehave.wasm" ] || fail "no $components/misbehave.wasm: run the test build first"
  [ -x "$out/venv/bin/moto_server" ] || fail "no moto server in $out/venv: run .ci/deps e2e"
}

# The backup's phase, errors, warnings and items backed up, as "PHASE ERRORS WARNINGS ITEMS".
backup_result() {
  velero backup get "$1" -o json | jq -r '"\(.status.phase) \(.status.errors // 0) \(.status.warnings // 0) \(.status.progress.itemsBackedUp // 0)"'
}

# Backs up vm-workloads (or the namespaces $2) as backup $1; fails unless Completed with no error and no warning.
backup_once() {
  local backup=$1 namespaces=${2:-vm-workloads}
  velero backup create "$backup" --include-namespaces "$namespaces" --snapshot-volumes=false --wait
  read -r phase errors warnings items < <(backup_result "$backup")
  velero backup logs "$backup" >"$run/$backup.log" 2>&1 || true
  echo "backup $backup: $phase, errors $errors, warnings $warnings, $items items"
  if [ "$phase" != Completed ] || [ "$errors" != 0 ] || [ "$warnings" != 0 ]; then
    velero backup describe "$backup" --details >"$run/$backup.describe" 2>&1 || true
    grep -E 'level=(warning|error)' "$run/$backup.log" | head -20 >&2 || true
    fail "backup $backup: $phase with $errors errors and $warnings warnings ($run/$backup.log, $run/$backup.describe)"
  fi
}

backup() {
  backup_once "$name"
  read -r _ backup_errors backup_warnings backup_items < <(backup_result "$name")
}

# ------------------------------------------------------------------------------------- archive
archive() {
  archive_path=$out/$name.tar.gz
  rm -f "$archive_path"
  velero backup download "$name" -o "$archive_path"
  tar -tzf "$archive_path" >"$run/archive.list"
  # The VM, and every additional item of its backup action that README promises (fixture README,
  # "Extended mode"), in the archive's resources/<resource>/namespaces/<ns>/<name>.json layout.
  local missing=0 entry
  while read -r entry; do
    [ -n "$entry" ] || continue
    if ! grep -qx "resources/$entry.json" "$run/archive.list"; then
      echo "not in the archive: $entry" >&2
      missing=$((missing + 1))
    fi
  done <<'EOF'
virtualmachines.kubevirt.io/namespaces/vm-workloads/fedora-web-01
controllerrevisions.apps/namespaces/vm-workloads/fedora-web-01-u1.medium-b1f0c3d2-6e4a-4f87-9d15-3c8e2a7f0b91-1
controllerrevisions.apps/namespaces/vm-workloads/fedora-web-01-fedora-secure-a47e9c10-58b3-4d2f-8e6a-0c9d1b7f3e52-2
virtualmachineinstances.kubevirt.io/namespaces/vm-workloads/fedora-web-01
pods/namespaces/vm-workloads/virt-launcher-fedora-web-01-q7m2x
datavolumes.cdi.kubevirt.io/namespaces/vm-workloads/fedora-web-01-rootdisk
persistentvolumeclaims/namespaces/vm-workloads/fedora-web-01-rootdisk
persistentvolumeclaims/namespaces/vm-workloads/web-content
secrets/namespaces/vm-workloads/fedora-web-01-cloudinit-user
secrets/namespaces/vm-workloads/fedora-web-01-cloudinit-net
configmaps/namespaces/vm-workloads/web-frontend-config
serviceaccounts/namespaces/vm-workloads/web-frontend
persistentvolumeclaims/namespaces/vm-workloads/web-logs
persistentvolumeclaims/namespaces/vm-workloads/persistent-state-for-fedora-web-01-x7k2p
secrets/namespaces/vm-workloads/fedora-web-01-ssh-authorized-keys
secrets/namespaces/vm-workloads/fedora-web-01-guest-passwords
virtualmachineclusterinstancetypes.instancetype.kubevirt.io/cluster/u1.medium
virtualmachinepreferences.instancetype.kubevirt.io/namespaces/vm-workloads/fedora-secure
network-attachment-definitions.k8s.cni.cncf.io/namespaces/vm-workloads/storage-vlan200
persistentvolumes/cluster/pvc-e8f3a6c2-5b19-4e7d-9c04-2a7b1d6e8f53
virtualmachineclusterpreferences.instancetype.kubevirt.io/cluster/windows.2k22.virtio
virtualmachineinstancereplicasets.kubevirt.io/namespaces/vm-workloads/web-replica
EOF
  [ "$missing" -eq 0 ] || fail "$missing promised items are not in $archive_path ($run/archive.list)"
  # The DataSource of the root disk lives in kubevirt-os-images: the action names it, and Velero
  # leaves it out because the backup includes only vm-workloads (it says so at info level).
  if grep -q 'datasources.cdi.kubevirt.io/namespaces/kubevirt-os-images/fedora' "$run/archive.list"; then
    fail "the DataSource of another namespace is in the archive of a vm-workloads backup"
  fi
  # The stored VM is the backup action's output: its instancetype and preference revisions pinned.
  local vm
  vm=$(tar -xzOf "$archive_path" resources/virtualmachines.kubevirt.io/namespaces/vm-workloads/fedora-web-01.json)
  [ "$(jq -r .spec.instancetype.revisionName <<<"$vm")" = fedora-web-01-u1.medium-b1f0c3d2-6e4a-4f87-9d15-3c8e2a7f0b91-1 ] ||
    fail "the stored VM's spec.instancetype.revisionName is not pinned"
  echo "archive $archive_path: $(grep -c '\.json$' "$run/archive.list") files; the VM and its 22 promised items are in it"
}

# ---------------------------------------------------------------------------------------- diff
diff_archive() {
  # stock against stock: the archive reads, every result is the same (exit 0).
  "$velero_wasm" diff "$archive_path" --new stock >"$run/diff-stock.txt"
  # A candidate: the stock kubevirt component in upstream mode, a stock override (a manifest alone,
  # docs/modules.md §4, §6).
  rm -rf "$run/candidate"
  mkdir -p "$run/candidate"
  printf '[settings]\nmode = "upstream"\n' >"$run/candidate/kubevirt.toml"
  local status=0
  "$velero_wasm" diff "$archive_path" --new "$run/candidate" --json >"$run/diff-upstream.json" || status=$?
  [ "$status" -eq 1 ] || fail "diff against upstream mode exited $status, not 1 (different) ($run/diff-upstream.json)"
  jq -e '[.actions[] | select(.action == "kubevirt-velero-plugin/backup-virtualmachine-action") | .differing[]
          | select(.name == "fedora-web-01")] | length == 1' "$run/diff-upstream.json" >/dev/null ||
    fail "diff does not name the VM fedora-web-01 as differing in upstream mode ($run/diff-upstream.json)"
  echo "diff: stock = stock; upstream mode differs in $(jq '.differences' "$run/diff-upstream.json") results of $(jq '.items' "$run/diff-upstream.json") items"
}

# ------------------------------------------------------------------------------------- restore
restore_result() {
  velero restore get "$1" -o json | jq -r '"\(.status.phase) \(.status.errors // 0) \(.status.warnings // 0)"'
}

restore() {
  # The CRDs Velero backed up with the custom resources stay out: they exist in this cluster, and
  # Velero warns once per CRD that "the in-cluster version is different" (a DR copy into the same
  # cluster; without the exclusion the restore is Completed with 9 such warnings).
  velero restore create "$restore_name" --from-backup "$name" \
    --namespace-mappings vm-workloads:vm-workloads-dr \
    --exclude-resources customresourcedefinitions.apiextensions.k8s.io \
    --labels velero.kubevirt.io/restore-run-strategy=Halted,velero.kubevirt.io/clear-mac-address=true,velero.kubevirt.io/generate-new-firmware-uuid=true \
    --wait
  read -r restore_phase restore_errors restore_warnings < <(restore_result "$restore_name")
  velero restore logs "$restore_name" >"$run/$restore_name.log" 2>&1 || true
  velero restore describe "$restore_name" --details >"$run/$restore_name.describe" 2>&1 || true
  echo "restore $restore_name: $restore_phase, errors $restore_errors, warnings $restore_warnings"
  if [ "$restore_phase" != Completed ] || [ "$restore_errors" != 0 ] || [ "$restore_warnings" != 0 ]; then
    sed -n '/^Warnings:/,/^Backup:/p' "$run/$restore_name.describe" >&2
    fail "restore $restore_name: $restore_phase with $restore_errors errors and $restore_warnings warnings ($run/$restore_name.log)"
  fi

  local dr=vm-workloads-dr nad vm
  # restore-nad-action: the CNI config's netAttachDefName follows the namespace mapping.
  nad=$(kubeobj get network-attachment-definitions.k8s.cni.cncf.io $dr storage-vlan200)
  [ "$(jq -r '.spec.config | fromjson | .netAttachDefName' <<<"$nad")" = "$dr/storage-vlan200" ] ||
    fail "restored NAD's netAttachDefName is $(jq -r '.spec.config | fromjson | .netAttachDefName' <<<"$nad"), not $dr/storage-vlan200"
  # restore-vm-action with the DR labels: halted, no MACs, a new firmware UUID.
  vm=$(kubeobj get virtualmachines.kubevirt.io $dr fedora-web-01)
  jq -e '.spec.runStrategy == "Halted" and (.spec | has("running") | not)' <<<"$vm" >/dev/null ||
    fail "restored VM: runStrategy $(jq -c .spec.runStrategy <<<"$vm"), not Halted"
  jq -e '[.spec.template.spec.domain.devices.interfaces[] | select(has("macAddress"))] | length == 0' <<<"$vm" >/dev/null ||
    fail "restored VM keeps MAC addresses"
  local uuid
  uuid=$(jq -r .spec.template.spec.domain.firmware.uuid <<<"$vm")
  [[ $uuid =~ ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$ ]] && [ "$uuid" != 6a1f9e3b-2d4c-5b8a-9e7f-0c3d2b1a4f68 ] ||
    fail "restored VM's firmware UUID is $uuid, not a fresh UUID v4"
  # Skipped by the restore actions: the owned VMI and every launcher/hotplug pod.
  [ -z "$(kubeobj list virtualmachineinstances.kubevirt.io $dr | grep -x fedora-web-01)" ] ||
    fail "the owned VMI fedora-web-01 was restored (restore-vmi-action must skip it)"
  [ -z "$(kubeobj list pods $dr)" ] || fail "pods were restored into $dr: $(kubeobj list pods $dr | tr '\n' ' ')"
  # The standalone VMI is restored without its node label.
  kubeobj get virtualmachineinstances.kubevirt.io $dr batch-worker-7 |
    jq -e '.metadata.labels | has("kubevirt.io/nodeName") | not' >/dev/null ||
    fail "restored VMI batch-worker-7 keeps kubevirt.io/nodeName"
  # restore-pvc-action: the user's own pvc-uid label is back, the backup's annotation gone.
  kubeobj get persistentvolumeclaims $dr web-content |
    jq -e '.metadata.labels["velero.kubevirt.io/pvc-uid"] == "legacy-archive-0042" and
           (.metadata.annotations // {} | has("velero.kubevirt.io/original-pvc-uid") | not)' >/dev/null ||
    fail "restored PVC web-content: pvc-uid label not restored"
  echo "restored: NAD netAttachDefName $dr/storage-vlan200, VM Halted without MACs and with firmware UUID $uuid, no VMI fedora-web-01, no pods, PVC labels back"
}

# ------------------------------------------------------------------------------------- hotswap
# The PVCs of backup $1's archive that carry (want=1) or lack (want=0) the label the added module sets.
pvcs_labelled() {
  local backup=$1 want=$2 archive=$out/$1.tar.gz f count=0
  rm -f "$archive"
  velero backup download "$backup" -o "$archive"
  for f in $(tar -tzf "$archive" | grep '^resources/persistentvolumeclaims/namespaces/vm-workloads/.*\.json$'); do
    count=$((count + 1))
    if [ "$(tar -xzOf "$archive" "$f" | jq -r '.metadata.labels["velero-wasm.io/seen"] // "absent"')" = true ]; then
      [ "$want" = 1 ] || fail "$f of backup $backup carries velero-wasm.io/seen: the deleted module was called"
    else
      [ "$want" = 0 ] || fail "$f of backup $backup lacks velero-wasm.io/seen: the added module was not called"
    fi
  done
  [ "$count" -gt 0 ] || fail "backup $backup holds no PVC of vm-workloads"
  echo "backup $backup: $count PVCs, each $([ "$want" = 1 ] && echo with || echo without) the label"
}

# Whether ConfigMap $1 of Velero's namespace has an Event of type $2 and reason $3.
configmap_says() {
  kubeobj events velero "$1" | grep -q "^$2 $3 "
}

# Waits for configmap_says "$@". The plugin process of a backup writes the state once its modules
# serve, and Velero stops that process when the backup ends: when a short backup ended first, the
# next plugin process writes it, so one more backup is started before giving up.
until_configmap_says() {
  wait_for 30 configmap_says "$@" && return 0
  velero backup create "$name-again-$RANDOM" --include-namespaces vm-workloads --snapshot-volumes=false --wait >/dev/null
  wait_for 30 configmap_says "$@"
}

hotswap() {
  # A new module while the server runs (no restart): the misbehave component's `label` case alone,
  # applying to PVCs, under action names Velero has never listed.
  local dir=$run/pvc-labeller sha
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$components/misbehave.wasm" "$dir/pvc-labeller.wasm"
  sha=$(sha256sum "$dir/pvc-labeller.wasm" | cut -d' ' -f1)
  printf 'sha256 = "%s"\nversion = "1.0.0"\n[settings]\ndomain = "e2e-added.velero-wasm.io"\ncases = "label"\nresources = "persistentvolumeclaims"\n' \
    "$sha" >"$dir/pvc-labeller.toml"
  "$velero_wasm" module pack "$dir" --out "$run/pvc-labeller.yaml"
  local before=$velero_pid
  kubeobj apply "$run/pvc-labeller.yaml"
  backup_once "$name-added"
  pvcs_labelled "$name-added" 1
  grep -q 'name=velero-wasm.io/added-backup-actions' "$run/velero-server.log" ||
    fail "the Velero server did not register the backup slot ($run/velero-server.log)"
  # Where the operator looks: the ConfigMap's Events and status annotation (docs/modules.md §11),
  # written by the plugin process once its modules serve.
  until_configmap_says velero-wasm-module-pvc-labeller Normal ServingThroughSlot ||
    fail "no ServingThroughSlot event on velero-wasm-module-pvc-labeller: $(kubeobj events velero velero-wasm-module-pvc-labeller)"
  kubeobj get configmaps velero velero-wasm-module-pvc-labeller |
    jq -e '.metadata.annotations["velero-wasm.io/status"] | fromjson | .state == "serving" and .through == "slot"' >/dev/null ||
    fail "the status annotation of velero-wasm-module-pvc-labeller does not say it serves through the slot"
  kubeobj events velero velero-wasm-module-pvc-labeller
  kubeobj delete configmaps velero velero-wasm-module-pvc-labeller
  # A module that cannot load (its manifest's sha256 is not its component's): its ConfigMap says why.
  # Nothing serves under its name, so its backup counts the error line the refusal is (operation.md).
  sed 's/pvc-labeller/pvc-broken/g; s/sha256 = "[0-9a-f]\{64\}"/sha256 = "'"$(printf '0%.0s' $(seq 64))"'"/' \
    "$run/pvc-labeller.yaml" >"$run/pvc-broken.yaml"
  kubeobj apply "$run/pvc-broken.yaml"
  velero backup create "$name-refused" --include-namespaces vm-workloads --snapshot-volumes=false --wait >/dev/null
  echo "backup $name-refused: $(backup_result "$name-refused")"
  until_configmap_says velero-wasm-module-pvc-broken Warning Refused ||
    fail "no Refused event on velero-wasm-module-pvc-broken: $(kubeobj events velero velero-wasm-module-pvc-broken)"
  kubeobj events velero velero-wasm-module-pvc-broken
  kubeobj delete configmaps velero velero-wasm-module-pvc-broken
  backup_once "$name-removed"
  pvcs_labelled "$name-removed" 0
  [ "$velero_pid" = "$before" ] && kill -0 "$velero_pid" || fail "the Velero server was restarted or died"
  echo "hotswap: module pvc-labeller served in the next backup with no restart (pid $velero_pid), and not after its ConfigMap was deleted"
}

# -------------------------------------------------------------------------------------- shadow
shadow() {
  local state=$run/scratch/velero-wasm
  # 1. kubevirt's candidate (upstream mode, the diff stage's override) as a shadow of the stock kubevirt.
  "$velero_wasm" module pack "$run/candidate" --shadow --out "$run/kubevirt-shadow.yaml"
  # 2. misbehave serving (every case made harmless: it labels the ConfigMaps it backs up) and a
  #    misbehave shadow whose `label` traps and whose `counter` names an additional item.
  local dir cases harmless sha
  sha=$(sha256sum "$components/misbehave.wasm" | cut -d' ' -f1)
  for dir in serving shadow; do
    mkdir -p "$run/misbehave-$dir"
    cp "$components/misbehave.wasm" "$run/misbehave-$dir/"
    printf 'sha256 = "%s"\n[settings]\ndomain = "e2e.velero-wasm.io"\n' "$sha" >"$run/misbehave-$dir/misbehave.toml"
  done
  # Every case of the misbehave component (tests/components/misbehave), as its actions name them.
  cases=$("$velero_wasm" actions --modules "$run/misbehave-serving" --json | jq -r '.actions[].name | select(startswith("e2e.velero-wasm.io/")) | sub(".*/"; "")')
  [ -n "$cases" ] || fail "velero-wasm actions lists no misbehave action"
  harmless=$(for c in $cases; do printf '%s:label,' "$c"; done)
  harmless=${harmless%,}
  printf 'sha256 = "%s"\nversion = "1.0.0"\n[settings]\ndomain = "e2e.velero-wasm.io"\ninstead = "%s"\n' \
    "$sha" "$harmless" >"$run/misbehave-serving/misbehave.toml"
  printf 'sha256 = "%s"\nversion = "1.1.0"\n[settings]\ndomain = "e2e.velero-wasm.io"\ninstead = "%s"\n' \
    "$sha" "$(sed 's/\blabel:label/label:trap/; s/\bcounter:label/counter:echo/' <<<"$harmless")" >"$run/misbehave-shadow/misbehave.toml"
  "$velero_wasm" module pack "$run/misbehave-serving" --out "$run/misbehave.yaml"
  "$velero_wasm" module pack "$run/misbehave-shadow" --shadow --out "$run/misbehave-shadow.yaml"
  kubeobj apply "$run/kubevirt-shadow.yaml" "$run/misbehave.yaml" "$run/misbehave-shadow.yaml"
  # The misbehave actions are new: Velero lists a plugin's actions when it starts (as a Velero pod
  # restarts after a plugin change), so restart it; the plugin reads the ConfigMaps at each start.
  start_velero

  shadow_name=$name-shadow
  backup_once "$shadow_name"
  # The shadows run after Velero has its answers; wait for their figures.
  local until=$((SECONDS + 90)) status=""
  while [ $SECONDS -lt $until ]; do
    status=$("$velero_wasm" status --state-dir "$state" --json 2>/dev/null) || true
    if jq -e '(.shadows.kubevirt.differing // 0) > 0 and ((.shadows.misbehave.faults // {}) | add // 0) > 0' \
      <<<"$status" >/dev/null 2>&1; then
      break
    fi
    sleep 2
  done
  "$velero_wasm" status --state-dir "$state" >"$run/status.txt" 2>&1 || true
  printf '%s\n' "$status" >"$run/status.json"
  cat "$run/status.txt"
  jq -e '(.shadows.kubevirt.differing // 0) > 0' <<<"$status" >/dev/null ||
    fail "velero-wasm status shows no difference of the kubevirt shadow ($run/status.json)"
  jq -e '((.shadows.misbehave.faults // {}) | add // 0) > 0' <<<"$status" >/dev/null ||
    fail "velero-wasm status shows no fault of the misbehave shadow ($run/status.json)"
}

# ----------------------------------------------------------------------------------------- hcp
# The HyperShift fixture (tests/fixtures/hcp/aws/cluster: a HostedCluster, its HostedControlPlane,
# NodePool, etcd and API server pods, etcd's PVC, StatefulSets, pull Secret) backed up the same way,
# with the default etcd backup method (volumeSnapshot; etcdSnapshot needs HyperShift's controller to
# answer the HCPEtcdBackup it creates). The fixture's CRDs carry no schema, which a real API server
# requires: they get ours (every field kept) and a status subresource.
hcp() {
  local hcp_fixture=$root/tests/fixtures/hcp f
  mkdir -p "$run/hcp"
  for f in "$hcp_fixture"/management/crd-*.json; do
    jq '.spec.versions |= map(.schema = {openAPIV3Schema: {type: "object", "x-kubernetes-preserve-unknown-fields": true}} | .subresources = {status: {}})' \
      "$f" >"$run/hcp/$(basename "$f")"
  done
  kubeobj apply "$run"/hcp/crd-*.json
  kubeobj wait-crds hypershift.openshift.io hive.openshift.io
  cat >"$run/hcp/namespaces.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: clusters}
---
apiVersion: v1
kind: Namespace
metadata: {name: clusters-aws-hc}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: default, namespace: clusters-aws-hc}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pvc-0a1b2c}
spec:
  capacity: {storage: 8Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  claimRef: {apiVersion: v1, kind: PersistentVolumeClaim, namespace: clusters-aws-hc, name: data-etcd-0}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0a1b2c}
EOF
  # The StatefulSet's status names readyReplicas but not replicas, which a real API server refuses
  # ("readyReplicas cannot be greater than status.replicas"): replicas from the spec.
  for f in "$hcp_fixture"/aws/cluster/*.json; do
    jq 'if .kind == "StatefulSet" and .status != null then .status.replicas = (.status.replicas // .spec.replicas) else . end' \
      "$f" >"$run/hcp/$(basename "$f")"
  done
  kubeobj apply "$run/hcp/namespaces.yaml" "$run"/hcp/[a-z]*-*.json
  # Velero learns the new resources when it starts.
  start_velero
  hcp_name=$name-hcp
  backup_once "$hcp_name" clusters,clusters-aws-hc
  read -r _ _ _ hcp_items < <(backup_result "$hcp_name")
  velero backup download "$hcp_name" -o "$out/$hcp_name.tar.gz"
  local stored
  stored=$(tar -xzOf "$out/$hcp_name.tar.gz" resources/hostedclusters.hypershift.openshift.io/namespaces/clusters/aws-hc.json)
  jq -e '.metadata.annotations | has("hypershift.openshift.io/restored-from-backup")' <<<"$stored" >/dev/null ||
    fail "the stored HostedCluster has no restored-from-backup annotation (the hcp action's work)"
  # The Backup does not back up volumes with the file system: the etcd pod is labelled for it.
  tar -xzOf "$out/$hcp_name.tar.gz" resources/pods/namespaces/clusters-aws-hc/etcd-0.json |
    jq -e '.metadata.labels["hypershift.openshift.io/fsbackup"] == "true"' >/dev/null ||
    fail "the stored etcd pod has no hypershift.openshift.io/fsbackup label (the hcp action's work)"
  echo "hcp: backup $hcp_name Completed, $hcp_items items; the stored HostedCluster is annotated restored-from-backup, the etcd pod labelled fsbackup"
}

stage build build
stage cluster cluster
stage objects objects
stage velero start_velero
stage backup backup
stage archive archive
stage diff diff_archive
stage restore restore
stage hotswap hotswap
stage shadow shadow
[ "${E2E_HCP:-1}" = 0 ] || stage hcp hcp
report
echo "e2e: backup $name Completed (errors $backup_errors, warnings $backup_warnings), $backup_items items, archive ${archive_path#"$root"/}; restore $restore_name $restore_phase (errors $restore_errors, warnings $restore_warnings)"
