#!/usr/bin/env bash
# `make test`: every check, stage by stage, each stage's time on one line as it ends and all of them
# in a table at the end. A stage that fails stops the run (its output above says why).
#
#   deps     what a fresh machine lacks (.ci/deps)
#   build    the components, the host binary and every test binary, in one cargo invocation
#   kube     the real kube-apiserver the live tests start (tests/kube/build.sh, started beside the
#            build stage; skipped when built)
#   cargo    `cargo test --workspace`: unit, component and integration tests
#   velero   Velero's own plugin client (v1.18.3) against the binary (tests/velero/run.sh)
#   static   the static (musl) binary in an empty root (tests/static/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

summary=()
total_start=$SECONDS

human() {
  local s=$1
  if [ "$s" -ge 60 ]; then printf '%d min %02d s' $((s / 60)) $((s % 60)); else printf '%d s' "$s"; fi
}

stage() {
  local name=$1
  shift
  echo "=== $name: $*"
  local start=$SECONDS status=0
  "$@" || status=$?
  local took=$((SECONDS - start))
  local result=ok
  [ "$status" -eq 0 ] || result="FAILED (exit $status)"
  summary+=("$(printf '%-8s %12s  %s' "$name" "$(human "$took")" "$result")")
  # Free disk after each stage: a build that fills the disk fails in ways that do not say so.
  echo "=== $name: $result in $(human "$took") ($(df -h --output=avail . | tail -1 | tr -d ' ') free on disk)"
  if [ "$status" -ne 0 ]; then
    report
    exit "$status"
  fi
}

report() {
  echo
  echo "stage            time  result"
  printf '%s\n' "${summary[@]}"
  printf '%-8s %12s\n' total "$(human $((SECONDS - total_start)))"
}

# Every test runs against the static (musl) build, the binary the image ships: one build of the whole
# dependency graph serves the tests, Velero's plugin client and the empty-root check alike.
target=$(uname -m)-unknown-linux-musl
export BINARY=$PWD/target/$target/debug/velero-wasm
cargo=${CARGO:-cargo}

stage deps .ci/deps
# kube-apiserver (a Go build) is built beside the cargo build, at a lower priority: cargo leaves a
# core idle at times (one long crate, the links), which Go then takes. The kube stage waits for it
# and shows its output; its time is what was left to wait.
kube_log=$(mktemp)
nice -n 10 tests/kube/build.sh >"$kube_log" 2>&1 &
kube_pid=$!
# A run that stops early stops the Go build too (the script and the go command it runs).
trap 'if [ -n "$kube_pid" ]; then pkill -P "$kube_pid" 2>/dev/null || true; kill "$kube_pid" 2>/dev/null || true; fi; rm -f "$kube_log"' EXIT
kube_built() {
  local status=0
  wait "$kube_pid" || status=$?
  kube_pid=
  cat "$kube_log"
  return "$status"
}
stage build "$cargo" test --workspace --target "$target" --no-run
stage kube kube_built
stage cargo "$cargo" test --workspace --target "$target"
stage velero tests/velero/run.sh
stage static tests/static/run.sh
report
