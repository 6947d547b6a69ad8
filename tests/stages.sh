#!/usr/bin/env bash
# `make test`: every check, stage by stage, each stage's time on one line as it ends and all of them
# in a table at the end. A stage that fails stops the run (its output above says why).
#
#   deps     what a fresh machine lacks (.ci/deps)
#   build    the components, the host binary and every test binary, in one cargo invocation
#   kube     the real kube-apiserver the live tests start (tests/kube/build.sh; skipped when built)
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
stage build "$cargo" test --workspace --target "$target" --no-run
stage kube tests/kube/build.sh
stage cargo "$cargo" test --workspace --target "$target"
stage velero tests/velero/run.sh
stage static tests/static/run.sh
report
