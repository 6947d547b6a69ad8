package main

import (
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt/process"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
	"github.com/vmware-tanzu/velero/pkg/util/logging"
)

// runPlugins is `velero run-plugins`: Velero's registry starts its own executable this way to list
// the plugins compiled into Velero, before those of the plugin directory. Ours has none.
func runPlugins() {
	framework.NewServer().BindFlags(pflag.NewFlagSet("run-plugins", pflag.ContinueOnError)).Serve()
}

// serverArgs makes this process look like `velero server <args>` to Velero's plugin code, which
// reads os.Args: [0] is the command it starts for its internal plugins (`run-plugins`), [2:] the
// arguments every plugin process gets.
func serverArgs(self string, args ...string) {
	os.Args = append([]string{self, "server"}, args...)
}

// discover is what `velero server` does at start: a registry over the plugin directory, scanned,
// with the server's logger at the server's level.
func discover(pluginDir string, server logrus.FieldLogger, level logrus.Level) (process.Registry, error) {
	registry := process.NewRegistry(pluginDir, server, level)
	return registry, registry.DiscoverPlugins()
}

// backupRun is one backup as Velero's backup controller sets it up: a temp-file logger carrying a
// fresh log counter hook, and a plugin manager built on that logger (clientmgmt.NewManager with the
// server's level), so every plugin line go-plugin reads lands in the backup's log and its counts.
type backupRun struct {
	counter *logging.LogHook
	log     logging.DualModeLogger
	manager clientmgmt.Manager
}

func newBackupRun(name string, registry process.Registry, level logrus.Level) (*backupRun, error) {
	counter := logging.NewLogHook()
	log, err := logging.NewTempFileLogger(level, logging.FormatText, counter, logrus.Fields{"backup": "velero/" + name})
	if err != nil {
		return nil, err
	}
	return &backupRun{counter: counter, log: log, manager: clientmgmt.NewManager(log, level, registry)}, nil
}

// itemFailed logs a failed item as Velero's backupper does ("Error backing up item", one error per
// item whose action returned an error).
func (b *backupRun) itemFailed(name string, err error) {
	b.log.WithError(err).WithField("name", name).Error("Error backing up item")
}

// counts is what the backup's status would say: warnings and errors.
func (b *backupRun) counts() (int, int) {
	return b.counter.GetCount(logrus.WarnLevel), b.counter.GetCount(logrus.ErrorLevel)
}

// entries are the messages the counter kept at `level` (Velero's own rendering of each line).
func (b *backupRun) entries(level logrus.Level) []string {
	r := b.counter.GetEntries(level)
	out := append([]string{}, r.Velero...)
	out = append(out, r.Cluster...)
	for _, list := range r.Namespaces {
		out = append(out, list...)
	}
	return out
}

// logged says whether a line at `level` holds every piece of `parts`.
func (b *backupRun) logged(level logrus.Level, parts ...string) bool {
	for _, e := range b.entries(level) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(e, p)
		}
		if all {
			return true
		}
	}
	return false
}

// close ends the backup as the controller's deferred calls do: CleanupClients, then the log.
func (b *backupRun) close() time.Duration {
	start := time.Now()
	b.manager.CleanupClients()
	took := time.Since(start)
	b.log.Dispose(logrus.New())
	return took
}
