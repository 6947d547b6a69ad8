// Command velero plays Velero against velero-wasm with Velero's own plugin client (v1.18.3).
//
// It builds the plugin manager exactly as `velero server` and its backup controller do: a
// process.Registry scanning a plugin directory that holds the velero-wasm binary (Velero also starts
// its own executable, `run-plugins`, for its internal plugins), then for each backup a temp-file
// logger carrying Velero's log counter hook and clientmgmt.NewManager on that logger. It drives
// every kind the plugin serves through Velero's restartable wrappers and asserts what Velero would
// record in the backup's status: the warnings and errors the counter hook counted, and the errors
// returned. The plugin process gets its configuration from this process's environment, as it gets
// Velero's.
//
// Usage: velero -binary target/.../velero-wasm -components target/wasm/wasm32-wasip2/component -work DIR
// [-only backup,restore,...] [-command PATH]
// (-only big-shadow, concurrent-gets and concurrent-gets-views run the opt-in scenarios of `make
// memory`: a shadow answering 60 MB items; 64 concurrent calls of one 15 MiB get each, against the API
// server -gets-kubeconfig names, read views off or on)
// It prints one line per check, then `N passed, N failed` alone on the last line, and exits 1 if any
// check failed.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vmware-tanzu/velero/pkg/util/logging"
)

const prefix = "test.velero-wasm.io/"

// checks counts what passed and failed, and prints one line per check.
type checks struct {
	out            io.Writer
	passed, failed int
	scenario       string
}

func (c *checks) ok(cond bool, what string, detail ...any) bool {
	if cond {
		c.passed++
		fmt.Fprintf(c.out, "ok    [%s] %s\n", c.scenario, what)
	} else {
		c.failed++
		fmt.Fprintf(c.out, "FAIL  [%s] %s %s\n", c.scenario, what, fmt.Sprint(detail...))
	}
	return cond
}

func (c *checks) noErr(err error, what string) bool {
	return c.ok(err == nil, what, err)
}

// counted checks the backup's warning and error counts, naming the counted lines when they differ.
func (c *checks) counted(b *backupRun, warnings, errors int, what string) {
	w, e := b.counts()
	c.ok(w == warnings && e == errors, fmt.Sprintf("%s: Velero counts %d warnings, %d errors", what, warnings, errors),
		fmt.Sprintf("got %d, %d: warnings %q errors %q", w, e, b.entries(logrus.WarnLevel), b.entries(logrus.ErrorLevel)))
}

// env is the test's setting of the plugin's environment (inherited from this process, as from Velero).
type env struct {
	binary, components, work, pluginDir, socketDir, state string
	// command is the path the plugin reports in ListPlugins (its argv[0]): the copy in the plugin
	// directory, unless a launcher runs it elsewhere (tests/static/run.sh, in an empty root).
	command string
	// kubeconfig names the API server of concurrent-gets (-gets-kubeconfig); the other scenarios reach none.
	kubeconfig string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "run-plugins" {
		runPlugins()
		return
	}
	binary := flag.String("binary", "target/debug/velero-wasm", "the velero-wasm binary")
	components := flag.String("components", "target/wasm/wasm32-wasip2/component", "the test components (kinds.wasm, misbehave.wasm)")
	work := flag.String("work", "target/velero/work", "scratch directory (emptied first)")
	command := flag.String("command", "", "the command the plugin reports (default: its copy in the plugin directory)")
	only := flag.String("only", "", "comma-separated scenarios to run after discovery (default: all)")
	kubeconfig := flag.String("gets-kubeconfig", "", "the API server concurrent-gets reads from (`make memory`'s hostile server)")
	flag.Parse()

	c := &checks{out: os.Stdout, scenario: "setup"}
	e, err := setup(*binary, *components, *work)
	if !c.noErr(err, "the plugin directory, modules and state directory are set up") {
		finish(c)
	}
	// Velero's loggers write to stdout: here they go to a file, so that stdout is the checks.
	logFile, err := os.Create(filepath.Join(e.work, "velero.log"))
	if !c.noErr(err, "velero.log is created") {
		finish(c)
	}
	os.Stdout = logFile
	if *command != "" {
		e.command = *command
	}
	e.kubeconfig = *kubeconfig

	self, _ := os.Executable()
	level := logrus.InfoLevel
	server := logging.DefaultLogger(level, logging.FormatText)

	// Velero 1.14 as a plugin host: `--log-level <lvl> --features <csv>`, no ItemBlockAction kind
	// (told by VELERO_WASM_KINDS, as docs/operation.md says for Velero 1.14).
	c.scenario = "velero-1.14-args"
	serverArgs(self, "--log-level", "info", "--features", "EnableCSI")
	os.Setenv("VELERO_WASM_KINDS", "BackupItemAction,BackupItemActionV2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction")
	registry, err := discover(e.pluginDir, server, level)
	if c.noErr(err, "the registry discovers the plugin directory") {
		listed(c, registry, e, false)
	}
	os.Unsetenv("VELERO_WASM_KINDS")

	// Velero 1.15+: every `velero server` argument, in every form; this registry serves the rest.
	c.scenario = "discovery"
	serverArgs(self, "--uploader-type=kopia", "--features=EnableCSI", "--restore-only", "--log-level=info",
		"--default-volumes-to-fs-backup=true", "--item-block-worker-count", "2")
	registry, err = discover(e.pluginDir, server, level)
	if !c.noErr(err, "the registry discovers the plugin directory") {
		finish(c)
	}
	listed(c, registry, e, true)

	wanted := map[string]bool{}
	for _, name := range strings.Split(*only, ",") {
		wanted[name] = name != ""
	}
	// Opt-in scenarios run only when -only names them: big-shadow and concurrent-gets(-views) are
	// `make memory`'s, run inside its memory cgroup.
	optIn := map[string]bool{"big-shadow": true, "concurrent-gets": true, "concurrent-gets-views": true}
	scenario := func(name string, run func()) {
		if (*only == "" && !optIn[name]) || wanted[name] {
			c.scenario = name
			run()
		}
	}
	scenario("backup", func() { backupKinds(c, e, registry, level) })
	scenario("restore", func() { restoreKinds(c, e, registry, level) })
	scenario("delete", func() { deleteKind(c, e, registry, level) })
	scenario("serving-failure", func() { servingFailure(c, e, registry, level) })
	scenario("killed", func() { killedMidBackup(c, e, registry, level) })
	scenario("shadow", func() { shadowed(c, e, registry, level) })
	scenario("hot-swap", func() { hotSwap(c, e, registry, server, level) })
	scenario("big-shadow", func() { bigShadow(c, e, registry, level) })
	scenario("concurrent-gets", func() { concurrentGets(c, e, server, level, false) })
	scenario("concurrent-gets-views", func() { concurrentGets(c, e, server, level, true) })
	finish(c)
}

func finish(c *checks) {
	fmt.Fprintf(c.out, "%d passed, %d failed\n", c.passed, c.failed)
	if c.failed > 0 {
		os.Exit(1)
	}
	os.Exit(0)
}

// setup makes the plugin directory (the binary, executable, as Velero's init containers copy it),
// the module directory and the environment the plugin reads.
func setup(binary, components, work string) (*env, error) {
	work, err := filepath.Abs(work)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(work); err != nil {
		return nil, err
	}
	e := &env{binary: binary, components: components, work: work,
		pluginDir: filepath.Join(work, "plugins"), socketDir: filepath.Join(work, "sockets"), state: filepath.Join(work, "state")}
	e.command = e.plugin()
	for _, dir := range []string{e.pluginDir, e.socketDir, e.state} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	bytes, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(e.pluginDir, "velero-wasm"), bytes, 0o755); err != nil {
		return nil, err
	}
	// A file that is not executable is skipped by Velero's scan (with a warning in the server log).
	if err := os.WriteFile(filepath.Join(e.pluginDir, "README"), []byte("not a plugin\n"), 0o644); err != nil {
		return nil, err
	}
	modules := filepath.Join(work, "modules")
	if err := moduleDir(modules, components, "kinds", "misbehave"); err != nil {
		return nil, err
	}
	for k, v := range map[string]string{
		"VELERO_WASM_MODULES":     modules,
		"VELERO_WASM_STATE_DIR":   e.state,
		"PLUGIN_UNIX_SOCKET_DIR":  e.socketDir,
		"VELERO_WASM_CONFIGMAPS":  "off",
		"VELERO_NAMESPACE":        "velero",
		"KUBERNETES_SERVICE_HOST": "",
	} {
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}
	os.Unsetenv("KUBERNETES_SERVICE_HOST")
	os.Unsetenv("KUBECONFIG")
	return e, nil
}

func (e *env) plugin() string {
	return filepath.Join(e.pluginDir, "velero-wasm")
}

// pluginPIDs are the velero-wasm processes this process started.
func pluginPIDs() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		text := string(stat)
		close := strings.LastIndexByte(text, ')')
		if close < 0 || !strings.Contains(text[:close], "(velero-wasm") {
			continue
		}
		fields := strings.Fields(text[close+1:])
		if len(fields) > 2 && fields[1] == strconv.Itoa(os.Getpid()) && fields[0] != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sockets lists what is left in the plugin's socket directory.
func (e *env) sockets() []string {
	entries, _ := os.ReadDir(e.socketDir)
	var names []string
	for _, entry := range entries {
		names = append(names, entry.Name())
	}
	return names
}

// closeBackup ends a backup as Velero does and checks that the plugin went away cleanly. `stale`
// are the sockets of processes killed outright, which nothing removes.
func closeBackup(c *checks, e *env, b *backupRun, stale ...string) {
	took := b.close()
	c.ok(took < 2*time.Second, "CleanupClients returns without go-plugin's 2 s forced kill", took)
	c.ok(len(pluginPIDs()) == 0, "no plugin process is left", pluginPIDs())
	left := e.sockets()
	c.ok(strings.Join(left, ",") == strings.Join(stale, ","), "the plugin removed its socket", left, stale)
	for _, name := range stale {
		_ = os.Remove(filepath.Join(e.socketDir, name))
	}
	c.ok(!b.logged(logrus.WarnLevel, "plugin failed to exit gracefully"), "go-plugin logged no forced kill")
}

// status is `velero-wasm status --json` of the state directory.
func (e *env) status() (map[string]any, error) {
	out, err := exec.Command(e.binary, "status", "--state-dir", e.state, "--json").Output()
	if err != nil {
		return nil, err
	}
	var v map[string]any
	return v, json.Unmarshal(out, &v)
}

func number(v any, path ...string) float64 {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return 0
		}
		v = m[p]
	}
	f, _ := v.(float64)
	return f
}
