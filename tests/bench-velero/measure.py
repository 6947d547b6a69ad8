#!/usr/bin/env python3
"""What `make bench-velero` (tests/bench-velero/run.sh) measures of one backup, and its summary.

  measure.py backup --row ROW --latency MS --workers N --scope SCOPE --name NAME --namespaces NS
                    --cli PATH --velero-pid PID --plugin PATH --audit FILE --log FILE
      Runs `velero backup create NAME --include-namespaces NS --snapshot-volumes=false --wait`
      (PATH: the CLI, a link named velero-cli so that its requests are told apart from the
      server's) and prints one JSON line: the backup's phase, errors, warnings, items backed up,
      its wall time by the Backup's status (startTimestamp -> completionTimestamp, whole seconds)
      and by this client's clock (create -> the CLI returns), the API requests kube-apiserver's
      audit log (FILE) received from Velero's server and from velero-wasm while it ran, and the
      plugin processes (children of the Velero server whose executable is the plugin PATH) started
      meanwhile, with their peak RSS (VmHWM) and CPU seconds, sampled every 20 ms.
      Should the Velero server die meanwhile (Velero v1.18.3 can: "concurrent map writes" with
      several item-block workers), the CLI would wait for ever: it is stopped, the server's
      orphaned plugin processes too, the line says phase VeleroServerDied, and the exit status is 3.

  measure.py summary FILE
      Reads those JSON lines and prints, per row, latency, workers and scope, one line of medians
      and spreads (`bench-velero: row=... latency=2ms workers=4 scope=100-VMs runs=3 ...`), then
      the same as a Markdown table.

Standard library only. Nothing is written but stdout and the --log file.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

# The user agents of the clients, client-go's `NAME/VERSION (OS/ARCH) SHA`: Velero's server sends
# two (`velero-server/…` from its controllers, `velero/…` from the clients its command line's
# factory makes), its CLI is run through a link named velero-cli so that its own requests are not
# the server's, and velero-wasm sends no User-Agent of its own (the audit event then has none).
# kube-apiserver's own loopback requests are "other".
VELERO_SERVER = ("velero/", "velero-server/")
VELERO_CLI = "velero-cli/"


def classify(agent):
    if agent.startswith(VELERO_CLI):
        return "cli"
    if agent.startswith(VELERO_SERVER):
        return "velero"
    if agent == "" or agent.startswith("velero-wasm"):
        return "plugin"
    return "other"


class Sampler(threading.Thread):
    """Every 20 ms: the Velero server's children whose executable is the plugin, their peak RSS and
    CPU time. A process seen before start() is not counted (none is, between backups)."""

    def __init__(self, velero_pid, plugin):
        super().__init__(daemon=True)
        self.velero_pid = velero_pid
        self.plugin = os.path.realpath(plugin)
        self.stop = threading.Event()
        self.children_ever = set()  # every child of the server seen, plugin or not
        self.before = set(self.children())
        self.seen = {}  # pid -> {"hwm_kib": int, "cpu_ticks": int}
        self.ticks = os.sysconf("SC_CLK_TCK")

    def children(self, plugins_only=True):
        found = []
        try:
            tasks = os.listdir(f"/proc/{self.velero_pid}/task")
        except OSError:
            return found
        for task in tasks:
            try:
                with open(f"/proc/{self.velero_pid}/task/{task}/children") as f:
                    found.extend(int(p) for p in f.read().split())
            except OSError:
                pass
        self.children_ever.update(found)
        return [p for p in found if self.is_plugin(p)] if plugins_only else found

    def is_plugin(self, pid):
        try:
            return os.path.realpath(f"/proc/{pid}/exe") == self.plugin
        except OSError:
            return False

    def sample(self, pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                hwm = next((int(l.split()[1]) for l in f if l.startswith("VmHWM:")), 0)
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        except (OSError, IndexError, ValueError):
            return
        entry = self.seen.setdefault(pid, {"hwm_kib": 0, "cpu_ticks": 0})
        entry["hwm_kib"] = max(entry["hwm_kib"], hwm)
        entry["cpu_ticks"] = max(entry["cpu_ticks"], cpu)

    def run(self):
        while not self.stop.is_set():
            for pid in self.children():
                if pid not in self.before:
                    self.sample(pid)
            for pid in list(self.seen):
                self.sample(pid)
            time.sleep(0.02)

    def result(self):
        return {
            "plugin_processes": len(self.seen),
            "plugin_peak_rss_mib": round(max((e["hwm_kib"] for e in self.seen.values()), default=0) / 1024, 1),
            "plugin_cpu_s": round(sum(e["cpu_ticks"] for e in self.seen.values()) / self.ticks, 2),
        }


def alive(pid):
    """Whether the process runs (a zombie, dead but not yet waited for, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def parse_time(text):
    # RFC 3339 with or without fractions, Z or an offset.
    text = text.replace("Z", "+00:00")
    if "." in text:
        head, rest = text.split(".", 1)
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits):]
        text = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    return datetime.fromisoformat(text).timestamp()


def audit_offset(path):
    try:
        st = os.stat(path)
        return st.st_ino, st.st_size
    except OSError:
        return None, 0


def audit_lines(path, start):
    """The audit log's lines written since `start` (its inode and size then), following a rotation
    by kube-apiserver (the old file renamed beside it, a new one at the path)."""
    inode, offset = start
    files = []
    directory = os.path.dirname(path) or "."
    base = os.path.basename(path)
    stem = base.rsplit(".", 1)[0]
    if inode is not None and os.stat(path).st_ino != inode:
        for name in os.listdir(directory):
            full = os.path.join(directory, name)
            if name.startswith(stem + "-") and os.stat(full).st_ino == inode:
                files.append((full, offset))
        files.append((path, 0))
    else:
        files.append((path, offset))
    for full, at in files:
        with open(full, "rb") as f:
            f.seek(at)
            for line in f:
                yield line


def count_requests(path, start, t0, t1):
    counts = {"velero": 0, "plugin": 0, "cli": 0, "other": 0}
    agents = {}
    for line in audit_lines(path, start):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("stage") != "ResponseComplete":
            continue
        at = parse_time(event.get("requestReceivedTimestamp", "1970-01-01T00:00:00Z"))
        if not t0 <= at <= t1:
            continue
        agent = event.get("userAgent", "")
        kind = classify(agent)
        counts[kind] += 1
        key = agent.split(" ")[0] or "(none)"
        agents[key] = agents.get(key, 0) + 1
    return counts, agents


def backup(args):
    start = audit_offset(args.audit)
    sampler = Sampler(args.velero_pid, args.plugin)
    sampler.start()
    t0 = time.time()
    died = False
    with open(args.log, "ab") as log:
        created = subprocess.Popen(
            [args.cli, "--namespace", "velero", "backup", "create", args.name,
             "--include-namespaces", args.namespaces, "--snapshot-volumes=false", "--wait"],
            stdout=log, stderr=log)
        while created.poll() is None:
            if not alive(args.velero_pid):
                died = True
                created.terminate()
                created.wait()
                break
            time.sleep(0.1)
    t1 = time.time()
    if died:
        sampler.stop.set()
        sampler.join()
        orphans = []
        for pid in sorted(sampler.children_ever):
            try:
                os.kill(pid, 15)
                orphans.append(pid)
            except OSError:
                pass
        print(json.dumps({"row": args.row, "latency_ms": args.latency, "workers": args.workers,
                          "scope": args.scope, "name": args.name, "phase": "VeleroServerDied",
                          "errors": 0, "warnings": 0, "wall_client_s": round(t1 - t0, 3),
                          "orphans_stopped": orphans}), flush=True)
        print(f"bench-velero: the Velero server (pid {args.velero_pid}) died during backup {args.name}; "
              f"stopped its plugin processes {orphans}", file=sys.stderr)
        return 3
    # The plugin processes end once Velero has the backup's results: let the sampler see them end.
    deadline = time.time() + 5
    while time.time() < deadline and any(os.path.exists(f"/proc/{p}") for p in sampler.seen):
        time.sleep(0.02)
    sampler.stop.set()
    sampler.join()
    if created.returncode != 0:
        print(f"bench-velero: velero backup create {args.name} exited {created.returncode} ({args.log})", file=sys.stderr)
        return 1
    got = subprocess.run([args.cli, "--namespace", "velero", "backup", "get", args.name, "-o", "json"],
                         capture_output=True, text=True)
    if got.returncode != 0:
        print(f"bench-velero: velero backup get {args.name}: {got.stderr.strip()}", file=sys.stderr)
        return 1
    status = json.loads(got.stdout).get("status", {})
    # Velero's own requests go on (its controllers, the BSL check) beside the backup: counted
    # between the create and the CLI's return, as the backup's, in every row alike.
    time.sleep(2)  # kube-apiserver's audit log is written in batches
    counts, agents = count_requests(args.audit, start, t0, t1)
    server_s = None
    if status.get("startTimestamp") and status.get("completionTimestamp"):
        server_s = parse_time(status["completionTimestamp"]) - parse_time(status["startTimestamp"])
    row = {
        "row": args.row, "latency_ms": args.latency, "workers": args.workers, "scope": args.scope,
        "name": args.name, "phase": status.get("phase"), "errors": status.get("errors", 0),
        "warnings": status.get("warnings", 0),
        "items": status.get("progress", {}).get("itemsBackedUp", 0),
        "wall_server_s": server_s, "wall_client_s": round(t1 - t0, 3),
        "requests_velero": counts["velero"], "requests_plugin": counts["plugin"],
        "requests_cli": counts["cli"], "requests_other": counts["other"], "agents": agents,
    }
    row.update(sampler.result())
    print(json.dumps(row), flush=True)
    return 0


COLUMNS = [
    ("wall_server_s", "wall (status)", "{:.0f} s"),
    ("wall_client_s", "wall (client)", "{:.2f} s"),
    ("items", "items", "{:.0f}"),
    ("requests_velero", "requests Velero", "{:.0f}"),
    ("requests_plugin", "requests plugin", "{:.0f}"),
    ("plugin_processes", "plugin processes", "{:.0f}"),
    ("plugin_peak_rss_mib", "plugin peak RSS", "{:.1f} MiB"),
    ("plugin_cpu_s", "plugin CPU", "{:.2f} s"),
]
ROWS = [
    "Velero alone",
    "velero-wasm stock",
    "velero-wasm kubevirt module only",
    "velero-wasm kubevirt upstream mode",
    "velero-wasm read views off",
]


def spread(values, fmt):
    values = [v for v in values if v is not None]
    if not values:
        return "n/a", "n/a"
    med = fmt.format(statistics.median(values))
    if min(values) == max(values):
        return med, med
    return med, f"{fmt.format(min(values))}–{fmt.format(max(values))}"


def summary(args):
    runs = []
    with open(args.file) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                run = json.loads(line)
                if "row" in run and "scope" in run:
                    runs.append(run)
    groups = {}
    for r in runs:
        groups.setdefault((r["scope"], r["latency_ms"], r["row"], r["workers"]), []).append(r)
    order = sorted(groups, key=lambda k: (k[0] != "1-VM", k[0], k[1], ROWS.index(k[2]) if k[2] in ROWS else 9, k[3]))
    table = []
    for key in order:
        scope, latency, row, workers = key
        group = groups[key]
        fields = []
        cells = []
        # Figures from the backups that completed; a run whose server died counts only in result=.
        done = [g for g in group if g["phase"] == "Completed"] or group
        for column, title, fmt in COLUMNS:
            med, rng = spread([g.get(column) for g in done], fmt)
            fields.append(f"{column}={med.replace(' ', '')}[{rng.replace(' ', '')}]")
            cells.append(med if med == rng else f"{med} ({rng})")
        phases = ",".join(sorted({f"{g['phase']}/{g['errors']}e/{g['warnings']}w" for g in group}))
        print(f"bench-velero: row=\"{row}\" latency={latency}ms workers={workers} scope={scope} runs={len(group)} "
              f"{' '.join(fields)} result={phases}")
        runs_cell = str(len(group)) if len(done) == len(group) or done is group else f"{len(done)} of {len(group)}"
        table.append(f"| {scope} | {latency} ms | {row} | {workers} | " + " | ".join(cells) + f" | {runs_cell} |")
    print()
    print("| backup | latency | configuration | workers | " + " | ".join(t for _, t, _ in COLUMNS) + " | runs |")
    print("|---|---|---|---|" + "---|" * len(COLUMNS) + "---|")
    print("\n".join(table))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("backup")
    for name in ["row", "scope", "name", "namespaces", "cli", "plugin", "audit", "log"]:
        b.add_argument("--" + name, required=True)
    b.add_argument("--latency", type=int, required=True)
    b.add_argument("--workers", type=int, required=True)
    b.add_argument("--velero-pid", type=int, required=True)
    s = sub.add_parser("summary")
    s.add_argument("file")
    args = parser.parse_args()
    return backup(args) if args.command == "backup" else summary(args)


if __name__ == "__main__":
    sys.exit(main())
