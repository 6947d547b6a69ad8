#!/usr/bin/env bash
# Stops what tests/kube/start.sh DIR started: kube-apiserver, then etcd (SIGTERM, SIGKILL after 10 s),
# and its watchdog if any. Leaves DIR (data, certificates, logs) in place. Safe to run twice, or
# on a DIR whose servers are already gone.
#
# Usage: tests/kube/stop.sh DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1

# Stops the process whose id is in DIR/NAME.pid, if it is still the one started there.
stop() {
  local file=$dir/$1.pid pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "kube stop: $1 (pid $pid) did not stop in 10 s; killing it" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
    echo "kube stop: $1 (pid $pid) stopped" >&2
  fi
  rm -f "$file"
}

stop kube-apiserver
stop etcd
# The watchdog last (it may be what runs this script: then it is no longer waiting for anything).
if [ -f "$dir/watchdog.pid" ]; then
  pid=$(cat "$dir/watchdog.pid")
  rm -f "$dir/watchdog.pid"
  [ "$pid" = "$PPID" ] || kill "$pid" 2>/dev/null || true
fi
