#!/usr/bin/env python3
"""A hostile Kubernetes API server for `make memory` (tests/memory/run.sh): answers discovery for the core group
and kubevirt.io/v1, then answers everything else (or discovery itself) with a body that never ends; in mode
`big-gets`, every other GET with a ConfigMap of 15 MiB (under the host's 16 MiB cap of one answer), and a list
of ConfigMaps with a list of one, `big-0` (what a read view lists)."""
import http.server, json, sys, socketserver

MODE = sys.argv[1]          # get | error | discovery | big-gets
PORT = int(sys.argv[2])
CHUNK = b"x" * 65536
BIG = "x" * (15 << 20)

CORE = {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
    {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["get", "list"]},
    {"name": "persistentvolumeclaims", "singularName": "persistentvolumeclaim", "namespaced": True, "kind": "PersistentVolumeClaim", "verbs": ["get", "list"]},
    {"name": "configmaps", "singularName": "configmap", "namespaced": True, "kind": "ConfigMap", "verbs": ["get", "list"]},
]}
KUBEVIRT = {"kind": "APIResourceList", "groupVersion": "kubevirt.io/v1", "resources": [
    {"name": "virtualmachineinstances", "singularName": "virtualmachineinstance", "namespaced": True, "kind": "VirtualMachineInstance", "verbs": ["get", "list"]},
    {"name": "virtualmachines", "singularName": "virtualmachine", "namespaced": True, "kind": "VirtualMachine", "verbs": ["get", "list"]},
]}

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def endless(self, status):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (1, b'{'))
            self.wfile.write(b"%x\r\n%s\r\n" % (9, b'"a":"xxxx'))
            while True:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
        except (BrokenPipeError, ConnectionResetError):
            pass
    def answer(self, doc):
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the host hung up: what the attack is about
    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/api/v1":
            return self.endless(200) if MODE == "discovery" else self.answer(CORE)
        if path == "/apis/kubevirt.io/v1":
            return self.answer(KUBEVIRT)
        if path == "/api":
            return self.answer({"kind": "APIVersions", "versions": ["v1"]})
        if path == "/apis":
            return self.answer({"kind": "APIGroupList", "groups": []})
        if MODE == "big-gets" and path.endswith("/configmaps"):
            return self.answer({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {},
                                "items": [{"metadata": {"name": "big-0", "namespace": path.split("/")[-2]},
                                           "data": {"big": BIG}}]})
        if MODE == "big-gets":
            name = path.rsplit("/", 1)[-1]
            return self.answer({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": name, "namespace": "velero"},
                                "data": {"big": BIG}})
        return self.endless(500 if MODE == "error" else 200)

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    def handle_error(self, request, client_address):
        pass  # a client that hung up (a call the host stopped): not the attack's concern

Server(("127.0.0.1", PORT), Handler).serve_forever()
