#!/usr/bin/env python3
"""Writes the hand-made starting inputs of each fuzz target into fuzz/corpus/<target>/ (run from the
repository root: `python3 fuzz/seeds/make_seeds.py`). `make fuzz` then grows and minimises the corpora."""
import hashlib
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "fuzz" / "corpus"
FIXTURES = ROOT / "tests" / "fixtures" / "kubevirt"


def write(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def compact(path):
    return json.dumps(json.loads(path.read_text()), separators=(",", ":"))


vm = compact(FIXTURES / "cluster" / "vm-fedora-web-01.json")
pod = compact(FIXTURES / "cluster" / "pod-virt-launcher-fedora-web-01.json")
pvc = compact(FIXTURES / "cluster" / "pvc-web-logs.json")
backup = compact(next((FIXTURES / "velero").glob("backup-*.json")))
restore_files = list((FIXTURES / "velero").glob("restore-*.json"))
restore = compact(restore_files[0]) if restore_files else '{"kind":"Restore","metadata":{"name":"r","namespace":"velero"}}'
configmap = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns","labels":{"app":"web"}}}'

# grpc: [method | 0x80 raw][chunk][plugin index][item \0 backup-or-restore \0 item-from-backup \0 plugin]
METHODS = [
    "ListPlugins", "BIA/AppliesTo", "BIA/Execute", "BIAv2/AppliesTo", "BIAv2/Execute", "BIAv2/Progress",
    "BIAv2/Cancel", "RIA/AppliesTo", "RIA/Execute", "RIAv2/AppliesTo", "RIAv2/Execute", "RIAv2/Progress",
    "RIAv2/Cancel", "RIAv2/AreAdditionalItemsReady", "IBA/AppliesTo", "IBA/GetRelatedItems",
    "DIA/AppliesTo", "DIA/Execute", "Shutdown", "StreamStdio", "StartStream", "Health/Check", "Health/Watch",
]
T = "test.velero-wasm.io/"
calls = [
    (2, T + "backup-v1", [configmap, '{"metadata":{"name":"b"}}', ""]),
    (2, "kubevirt-velero-plugin/backup-virtualmachine-action", [vm, backup, ""]),
    (4, T + "backup-v2", [configmap, '{"metadata":{"name":"b"}}', ""]),
    (5, T + "backup-v2", ["op-1700000000-0-1000", '{"metadata":{"name":"b"}}', ""]),
    (8, T + "restore-v1", [configmap, '{"metadata":{"name":"r"}}', configmap]),
    (8, "kubevirt-velero-plugin/restore-pod-action", [pod, restore, pod]),
    (10, T + "restore-v2", [configmap, '{"metadata":{"name":"r"}}', configmap]),
    (13, T + "restore-v2", ['{"metadata":{"name":"r"}}', "", ""]),
    (15, T + "item-block", [pod, '{"metadata":{"name":"b"}}', ""]),
    (17, T + "delete", [configmap, '{"metadata":{"name":"b"}}', ""]),
    (2, "kubevirt-velero-plugin/backup-pvc-action", [pvc, backup, ""]),
]
for method, plugin, fields in calls:
    write("grpc", bytes([method, 0, 255]) + b"\0".join(f.encode() for f in fields) + b"\0" + plugin.encode())
for method in [0, 1, 3, 7, 9, 14, 16, 18, 19, 21]:
    write("grpc", bytes([method, 0, 255]) + b"\0\0\0" + (T + "backup-v1").encode())


def frame(message):
    return b"\0" + len(message).to_bytes(4, "big") + message


def field(number, value):
    return bytes([number << 3 | 2, len(value)]) + value


# Raw frames: ListPlugins' empty message in chunks, two broker messages, a compressed frame, a short one.
write("grpc", bytes([0x80 | 0, 1]) + frame(b""))
write("grpc", bytes([0x80 | 20, 0]) + frame(b"\x08\x07" + field(2, b"unix")) + frame(b"\x08\x08"))
write("grpc", bytes([0x80 | 2, 3]) + b"\x01\0\0\0\x05hello")
write("grpc", bytes([0x80 | 1, 0]) + frame(field(1, (T + "backup-v1").encode()))[:-3])
write("grpc", bytes([0x80 | 21, 0]) + frame(field(1, b"plugin")))

# documents: JSON, YAML with several documents and a List, anchors.
write("documents", vm)
write("documents", "kind: Pod\nmetadata: {name: b, namespace: ns}\n---\nkind: List\nitems:\n- {kind: Pod, metadata: {name: c}}\n")
write("documents", "a: &a [x, y]\nb: *a\nkind: ConfigMap\nmetadata:\n  name: m\n  labels: {app: web}\n")
write("documents", '[{"kind":"PodList","items":[' + pod + "]}]")

# manifest: the stock manifests and the documented example.
for toml in sorted(ROOT.glob("actions/*/*.toml")):
    write("manifest", toml.read_text())
write("manifest", '''sha256 = "''' + "0" * 64 + '''"
description = "d"
[limits]
timeout = "30s"
memory = "256MiB"
output = "64MiB"
http-timeout = "10s"
http-response = "1MiB"
[[grant.kube]]
resources = ["pods", "persistentvolumeclaims"]
verbs = ["get", "list"]
namespaces = ["@item", "kube-*", "@velero", ""]
[grant]
http = ["sts.amazonaws.com", "*.blob.core.windows.net", "http://127.0.0.1:9000"]
env = ["AZURE_TENANT_ID", "AZURE_*"]
env-files = ["AWS_WEB_IDENTITY_TOKEN_FILE"]
[settings]
mode = "extended"
''')

# selectors: labels \0 fields \0 item \0 namespace \0 included resources \0 excluded resources
#            \0 included namespaces \0 excluded namespaces
write("selectors", "app=web,tier in (db,cache),!legacy,x notin (a),n>3,m<2,k==v,o!=p\0metadata.name=cm,metadata.namespace!=kube-system\0" + configmap + "\0ns\0configmaps,pods.\0secrets\0n*,default\0kube-*")
write("selectors", "app\0spec.x==1\0" + vm + "\0default\0virtualmachines.kubevirt.io,VirtualMachine\0*\0*\0")

# guest_capabilities: [action] url \0 region \0 credentials \0 now \0 variable \0 file \0 resource \0 name \0 namespace
write("guest_capabilities", b"\0" + b"https://sts.amazonaws.com/?Action=x\0\0\0\0\0\0\0\0")
write("guest_capabilities", b"\0" + b"http://127.0.0.1:9000/bucket\0\0\0\0\0\0\0\0")
write("guest_capabilities", b"\0" + b"https://acct.blob.core.windows.net:443/c?x=1\0\0\0\0\0\0\0\0")
write("guest_capabilities", b"\1" + b"s3://bucket/key\0us-east-1\0[default]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n\01700000000\0\0\0\0\0")
write("guest_capabilities", b"\2" + b"\0\0\0\0FUZZ_VARIABLE\0FUZZ_FILE\0\0\0")
write("guest_capabilities", b"\3" + b"\0\0\0\0\0\0persistentvolumeclaims\0web-logs\0vm-workloads")
write("guest_capabilities", b"\3" + b"\0\0\0\0\0\0secrets\0fedora-web-01-cloudinit-user\0kube-system")

# diff_archive: [mode] then the file (mode 0), the bytes to gzip (mode 1), or tar entries (mode 2)
import io
import tarfile


def tar_of(files):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


velero_archive = tar_of([
    ("metadata/version", b"1\n"),
    ("resources/virtualmachines.kubevirt.io/namespaces/vm-workloads/fedora-web-01.json", vm.encode()),
    ("resources/pods/namespaces/vm-workloads/virt-launcher.json", pod.encode()),
    ("resources/persistentvolumes/cluster/pv-1.json", b'{"kind":"PersistentVolume","metadata":{"name":"pv-1"}}'),
    ("resources/" + "x" * 120 + "/cluster/long.json", b'{"kind":"X","metadata":{"name":"long"}}'),
])
write("diff_archive", b"\1" + velero_archive)
write("diff_archive", b"\0" + pvc.encode())
write("diff_archive", b"\2" + b"\x02\x30\x02\xff\x00\x05" + b'{"a":1}')

# oci: image manifest \0 reference \0 docker config \0 registry
layer = {"mediaType": "application/wasm", "digest": "sha256:" + "0" * 64, "size": 4,
         "annotations": {"org.opencontainers.image.title": "m.wasm"}}
image = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
         "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": "sha256:" + "1" * 64, "size": 2},
         "layers": [layer],
         "annotations": {"io.velero-wasm.module.name": "m", "io.velero-wasm.module.manifest": "[limits]\ntimeout = \"5s\"\n"}}
index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [layer]}
docker = '{"auths":{"https://index.docker.io/v1/":{"auth":"cm9ib3Q6czNjcmV0"},"127.0.0.1:5000":{"username":"u","password":"p"}}}'
write("oci", json.dumps(image) + "\0oci://127.0.0.1:5000/mods/kubevirt:1.2@sha256:" + "a" * 64 + "\0" + docker + "\0docker.io")
write("oci", json.dumps(index) + "\0registry.example.com/team/m:latest\0" + docker + "\0127.0.0.1:5000")

# settings: manifest (or override) \0 key=value lines
write("settings", '''[settings]
mode = "extended"
storage-classes = { gp2 = "gp3" }

[settings-schema.mode]
values = ["upstream", "extended"]
default = "extended"

[settings-schema.storage-classes]
type = "map"
items = "string"
default = {}

[settings-schema.retries]
type = "integer"
default = 3
\0mode=upstrem
retries=x
storage-classes={"a":1}''')
write("settings", '[settings]\nmode = "upstream"\n\0mode=extended')
