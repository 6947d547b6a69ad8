#!/usr/bin/env bash
# Starts a real Kubernetes API server for tests: etcd and kube-apiserver on free 127.0.0.1 ports, all
# state under DIR, RBAC authorization on. Returns once /readyz answers ok; both keep running.
#
# Usage: tests/kube/start.sh DIR        (stop them with tests/kube/stop.sh DIR)
#
#   DIR                 created if missing; must not hold a running server already. It receives:
#     admin.kubeconfig    a kubeconfig for user `admin` (client certificate, group system:masters)
#     server.json         {"server", "etcd", "kubeconfig", "apiserverPid", "etcdPid", "watchdogPid"}
#                         (also printed on stdout, one line: the only thing start.sh prints there)
#     pki/                the self-made CA (ca.crt, ca.key), the serving certificate (127.0.0.1,
#                         localhost), the admin client certificate, the service-account key pair
#     etcd/               etcd's data;  etcd.log, kube-apiserver.log  their output
#     etcd.pid, kube-apiserver.pid, watchdog.pid
#
#   Environment (all optional):
#     KUBE_APISERVER      the binary (default target/kube/bin/kube-apiserver, built by tests/kube/build.sh)
#     ETCD                the etcd binary (default: etcd on PATH, Debian's etcd-server)
#     KUBE_WATCH_PID      a process id: a watchdog stops both servers (tests/kube/stop.sh DIR) within
#                         a second of that process ending, so a killed test leaves no orphan behind
#     KUBE_REMOVE_DIR=1   with KUBE_WATCH_PID: the watchdog also removes DIR after stopping them
#     KUBE_READY_TIMEOUT  seconds to wait for /readyz (default 120)
#     KUBE_APISERVER_ARGS more kube-apiserver flags, split at spaces (an audit policy and log, say)
#
# Authentication: client certificates signed by pki/ca.crt (the admin) and service-account tokens
# (signed with pki/sa.key, issuer https://kubernetes.default.svc.cluster.local; ask the TokenRequest
# API for one). Authorization: RBAC only, so a service account may do exactly what its bindings allow.
# Progress and errors go to stderr; on failure it stops what it started and exits non-zero, naming
# the log to read.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
mkdir -p "$1"
dir=$(cd "$1" && pwd)
apiserver=${KUBE_APISERVER:-$root/target/kube/bin/kube-apiserver}
etcd=${ETCD:-$(command -v etcd || true)}
timeout=${KUBE_READY_TIMEOUT:-120}
read -r -a extra_args <<<"${KUBE_APISERVER_ARGS:-}"
say() { echo "kube start: $*" >&2; }

[ -x "$apiserver" ] || { say "no kube-apiserver at $apiserver: run tests/kube/build.sh first"; exit 1; }
[ -n "$etcd" ] && [ -x "$etcd" ] || { say "no etcd on PATH: install Debian's etcd-server (.ci/deps)"; exit 1; }
for pidfile in "$dir/etcd.pid" "$dir/kube-apiserver.pid"; do
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    say "$dir already has a running server (pid $(cat "$pidfile")): tests/kube/stop.sh $dir first"
    exit 1
  fi
done

# The watchdog first, so that it guards the servers from the moment they start: if the watched
# process ends while this script still waits for them (this script then dies of the closed pipe), it
# stops whatever has a pid file. Its own session, its output in a log, so that it outlives this
# script without holding the caller's pipes open.
watchdog_pid=""
if [ -n "${KUBE_WATCH_PID:-}" ]; then
  setsid bash -c '
    while kill -0 "$1" 2>/dev/null; do sleep 1; done
    "$2/stop.sh" "$3"
    [ "$4" = 1 ] && rm -rf "$3"
  ' watchdog "$KUBE_WATCH_PID" "$root/tests/kube" "$dir" "${KUBE_REMOVE_DIR:-0}" </dev/null >>"$dir/watchdog.log" 2>&1 &
  watchdog_pid=$!
  echo "$watchdog_pid" >"$dir/watchdog.pid"
fi

# Free loopback ports, chosen by the kernel. Another process could take one before we bind it; the
# start then fails and says which port in the log.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The PKI: a CA, the API server's serving certificate, the admin's client certificate, the
# service-account signing key. openssl only, as an operator would make them.
pki=$dir/pki
mkdir -p "$pki"
if [ ! -f "$pki/sa.pub" ]; then
  say "making the CA and certificates in $pki"
  (
    cd "$pki"
    ossl() { openssl "$@" >/dev/null 2>&1 || { echo "openssl $1 failed" >&2; openssl "$@"; }; }
    ossl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=velero-wasm-test-ca"
    ossl req -newkey rsa:2048 -nodes -keyout serving.key -out serving.csr -subj "/CN=kube-apiserver"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >serving.ext
    ossl x509 -req -in serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out serving.crt -days 3650 -extfile serving.ext
    ossl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=admin"
    printf 'extendedKeyUsage=clientAuth\n' >admin.ext
    ossl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 3650 -extfile admin.ext
    ossl genrsa -out sa.key 2048
    ossl rsa -in sa.key -pubout -out sa.pub
  )
fi

started=()
fail() {
  say "$1"
  for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; done
  exit 1
}

# etcd, data on disk under DIR.
etcd_port=$(free_port)
peer_port=$(free_port)
etcd_url=http://127.0.0.1:$etcd_port
say "etcd $("$etcd" --version | sed -n 's/^etcd Version: //p') on $etcd_url"
"$etcd" --name test --data-dir "$dir/etcd" \
  --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "test=http://127.0.0.1:$peer_port" --logger zap --log-outputs stderr \
  --snapshot-count 10000 --quota-backend-bytes $((2 << 30)) \
  </dev/null >"$dir/etcd.log" 2>&1 &
etcd_pid=$!
started+=("$etcd_pid")
echo "$etcd_pid" >"$dir/etcd.pid"

# kube-apiserver, once etcd answers.
for _ in $(seq 100); do
  curl -fsS "$etcd_url/health" >/dev/null 2>&1 && break
  kill -0 "$etcd_pid" 2>/dev/null || fail "etcd exited; see $dir/etcd.log"
  sleep 0.1
done
port=$(free_port)
server=https://127.0.0.1:$port
say "kube-apiserver $("$apiserver" --version 2>/dev/null | awk '{print $2}') on $server"
"$apiserver" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
  --etcd-servers "$etcd_url" \
  --tls-cert-file "$pki/serving.crt" --tls-private-key-file "$pki/serving.key" \
  --client-ca-file "$pki/ca.crt" \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --api-audiences https://kubernetes.default.svc.cluster.local \
  --authorization-mode RBAC \
  --service-cluster-ip-range 10.96.0.0/16 \
  --cert-dir "$pki" \
  --endpoint-reconciler-type none \
  --profiling=false \
  ${extra_args[@]+"${extra_args[@]}"} \
  </dev/null >"$dir/kube-apiserver.log" 2>&1 &
apiserver_pid=$!
started+=("$apiserver_pid")
echo "$apiserver_pid" >"$dir/kube-apiserver.pid"

kubeconfig=$dir/admin.kubeconfig
cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: admin
clusters:
- name: test
  cluster:
    server: $server
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: admin
  context:
    cluster: test
    user: admin
EOF

start=$SECONDS
until curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$server/readyz" >/dev/null 2>&1; do
  kill -0 "$etcd_pid" 2>/dev/null || fail "etcd exited; see $dir/etcd.log"
  kill -0 "$apiserver_pid" 2>/dev/null || fail "kube-apiserver exited; see $dir/kube-apiserver.log"
  [ $((SECONDS - start)) -lt "$timeout" ] || fail "kube-apiserver not ready after ${timeout} s; see $dir/kube-apiserver.log"
  sleep 0.2
done
say "ready in $((SECONDS - start)) s; kubeconfig $kubeconfig"

printf '{"server":"%s","etcd":"%s","kubeconfig":"%s","apiserverPid":%s,"etcdPid":%s,"watchdogPid":%s}\n' \
  "$server" "$etcd_url" "$kubeconfig" "$apiserver_pid" "$etcd_pid" "${watchdog_pid:-null}" | tee "$dir/server.json"
