package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt/process"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework/common"
	"github.com/vmware-tanzu/velero/pkg/plugin/velero"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func backup(name string) *velerov1.Backup {
	return &velerov1.Backup{
		TypeMeta:   metav1.TypeMeta{APIVersion: "velero.io/v1", Kind: "Backup"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "velero", UID: "b-uid-" + "1"},
		Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{"*"}},
		Status:     velerov1.BackupStatus{Phase: velerov1.BackupPhaseInProgress},
	}
}

func restore() *velerov1.Restore {
	return &velerov1.Restore{
		TypeMeta:   metav1.TypeMeta{APIVersion: "velero.io/v1", Kind: "Restore"},
		ObjectMeta: metav1.ObjectMeta{Name: "nightly-restore", Namespace: "velero", UID: "r-uid-1"},
		Spec:       velerov1.RestoreSpec{BackupName: "nightly"},
	}
}

func object(fields map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: fields}
}

func configMap() *unstructured.Unstructured {
	return object(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"},
		"metadata": map[string]any{"name": "cm", "namespace": "shop"}})
}

func pod() *unstructured.Unstructured {
	return object(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "db-0", "namespace": "shop"},
		"spec": map[string]any{"volumes": []any{map[string]any{"name": "d", "persistentVolumeClaim": map[string]any{"claimName": "data-db-0"}}}}})
}

func ids(list []velero.ResourceIdentifier) string {
	var out []string
	for _, r := range list {
		out = append(out, fmt.Sprintf("%s/%s %s/%s", r.Group, r.Resource, r.Namespace, r.Name))
	}
	return strings.Join(out, ", ")
}

func id(group, resource, namespace, name string) velero.ResourceIdentifier {
	return velero.ResourceIdentifier{GroupResource: schema.GroupResource{Group: group, Resource: resource}, Namespace: namespace, Name: name}
}

// ours are the plugins of `kind` the registry found in our binary.
func ours(registry process.Registry, kind common.PluginKind, e *env) []string {
	var names []string
	for _, p := range registry.List(kind) {
		if p.Command == e.command {
			names = append(names, p.Name)
		}
	}
	return names
}

// listed checks what the registry made of the plugin's ListPlugins.
func listed(c *checks, registry process.Registry, e *env, itemBlock bool) {
	want := map[common.PluginKind][]string{
		common.PluginKindBackupItemAction:    {"backup-v1"},
		common.PluginKindBackupItemActionV2:  {"backup-v2", "backup-v1"},
		common.PluginKindRestoreItemAction:   {"restore-v1"},
		common.PluginKindRestoreItemActionV2: {"restore-v2", "restore-v1"},
		common.PluginKindDeleteItemAction:    {"delete"},
		common.PluginKindItemBlockAction:     {"item-block"},
	}
	for kind, names := range want {
		got := map[string]bool{}
		for _, n := range ours(registry, kind, e) {
			got[n] = true
		}
		for _, n := range names {
			expected := itemBlock || kind != common.PluginKindItemBlockAction
			c.ok(got[prefix+n] == expected, fmt.Sprintf("%s %s registered: %v", kind, n, expected))
		}
	}
	// v1 actions are listed under v2 as well (Velero adapts them); misbehave's are backup actions.
	c.ok(len(ours(registry, common.PluginKindBackupItemAction, e)) > 10, "misbehave's backup actions are registered too",
		ours(registry, common.PluginKindBackupItemAction, e))
	_, err := registry.Get(common.PluginKindBackupItemAction, "example.io/nope")
	c.ok(err != nil && strings.Contains(err.Error(), "unable to locate BackupItemAction plugin named example.io/nope"),
		"an unknown name is Velero's own not-found error", err)
	c.ok(len(pluginPIDs()) == 0, "the listing processes have exited", pluginPIDs())
	c.ok(len(e.sockets()) == 0, "and removed their sockets", e.sockets())
}

// backupKinds is a backup's calls: AppliesTo of every action, every backup kind's calls.
func backupKinds(c *checks, e *env, registry process.Registry, level logrus.Level) {
	b, err := newBackupRun("nightly", registry, level)
	if !c.noErr(err, "the backup's logger and plugin manager are set up") {
		return
	}
	defer closeBackup(c, e, b)
	m := b.manager

	v1s, err := m.GetBackupItemActions()
	if c.noErr(err, "GetBackupItemActions") {
		bad := appliesTo(len(v1s), func(i int) (string, error) { _, err := v1s[i].AppliesTo(); return "", err })
		c.ok(len(bad) == 0, fmt.Sprintf("AppliesTo answers on all %d BackupItemActions", len(v1s)), bad)
	}
	v2s, err := m.GetBackupItemActionsV2()
	if c.noErr(err, "GetBackupItemActionsV2 (what the backup controller calls)") {
		bad := appliesTo(len(v2s), func(i int) (string, error) { _, err := v2s[i].AppliesTo(); return v2s[i].Name(), err })
		c.ok(len(bad) == 0, fmt.Sprintf("AppliesTo answers on all %d BackupItemActionV2s", len(v2s)), bad)
	}
	ibas, err := m.GetItemBlockActions()
	if c.noErr(err, "GetItemBlockActions") {
		bad := appliesTo(len(ibas), func(i int) (string, error) { _, err := ibas[i].AppliesTo(); return ibas[i].Name(), err })
		c.ok(len(bad) == 0, fmt.Sprintf("AppliesTo answers on all %d ItemBlockActions", len(ibas)), bad)
	}

	v1, err := m.GetBackupItemAction(prefix + "backup-v1")
	if c.noErr(err, "GetBackupItemAction backup-v1") {
		sel, err := v1.AppliesTo()
		c.ok(err == nil && strings.Join(sel.IncludedResources, ",") == "configmaps,pods" && strings.Join(sel.ExcludedNamespaces, ",") == "kube-system",
			"the selector arrives whole", sel, err)
		item, extra, err := v1.Execute(configMap(), backup("nightly"))
		if c.noErr(err, "BackupItemAction Execute") {
			c.ok(reflect.DeepEqual(item.UnstructuredContent(), configMap().Object), "the item comes back unchanged", item)
			c.ok(ids(extra) == "/persistentvolumeclaims shop/cm-data, apps/deployments shop/cm",
				"additional items: plural resources, groups without versions", ids(extra))
		}
	}
	adapted, err := m.GetBackupItemActionV2(prefix + "backup-v1")
	if c.noErr(err, "a v1 action through Velero's v2 adapter") {
		_, extra, op, post, err := adapted.Execute(configMap(), backup("nightly"))
		c.ok(err == nil && op == "" && len(post) == 0 && len(extra) == 2, "Execute through the adapter", err, op, post, extra)
	}

	v2, err := m.GetBackupItemActionV2(prefix + "backup-v2")
	if c.noErr(err, "GetBackupItemActionV2 backup-v2") {
		item, _, op, post, err := v2.Execute(configMap(), backup("nightly"))
		if c.noErr(err, "BackupItemActionV2 Execute") {
			c.ok(reflect.DeepEqual(item.UnstructuredContent(), configMap().Object) && strings.HasPrefix(op, "op-"),
				"v2 Execute returns the item and an operation", op)
			c.ok(ids(post) == "/configmaps shop/cm", "post-operation items", ids(post))
			p, err := v2.Progress(op, backup("nightly"))
			c.ok(err == nil && p.NTotal == 1000 && !p.Started.IsZero(), "Progress: figures and start", err, p)
			c.noErr(v2.Cancel(op, backup("nightly")), "Cancel")
		}
		_, err = v2.Progress("bogus", backup("nightly"))
		c.ok(err != nil && strings.Contains(err.Error(), "operation ID bogus is invalid"), "Progress of an unknown operation fails", err)
	}

	iba, err := m.GetItemBlockAction(prefix + "item-block")
	if c.noErr(err, "GetItemBlockAction item-block") {
		related, err := iba.GetRelatedItems(pod(), backup("nightly"))
		c.ok(err == nil && ids(related) == "/persistentvolumeclaims shop/data-db-0", "ItemBlockAction GetRelatedItems", err, ids(related))
	}

	// Sixteen items at once through the one restartable action, as Velero's item block workers do.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			item, _, err := v1.Execute(configMap(), backup("nightly"))
			if err == nil && !reflect.DeepEqual(item.UnstructuredContent(), configMap().Object) {
				err = errors.New("wrong item")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	var failures []error
	for err := range errs {
		if err != nil {
			failures = append(failures, err)
		}
	}
	c.ok(len(failures) == 0, "16 concurrent Executes all succeed", failures)

	// The guest's info line reaches the backup log with its item, as go-plugin parsed it.
	c.ok(b.logged(logrus.InfoLevel, "resource: /configmaps", "name: /cm", "message: /backing up"),
		"the guest's info line is in the backup log with its resource and name", b.entries(logrus.InfoLevel))
	c.ok(b.logged(logrus.InfoLevel, "serving Velero's plugin protocol"), "the plugin's start-up line is in the backup log, at info")
	c.ok(!b.logged(logrus.InfoLevel, "modules loaded"), "the plugin's debug lines stay out at Velero's info level")
	c.counted(b, 0, 0, "a clean backup")
}

func appliesTo(n int, call func(int) (string, error)) []string {
	var bad []string
	for i := 0; i < n; i++ {
		if name, err := call(i); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
		}
	}
	sort.Strings(bad)
	return bad
}

// restoreKinds is a restore's calls. Velero's restore status counts the errors and warnings its
// restore collects (returned errors), not log lines; the plugin's lines are still in the restore
// log, and none is at warn or error.
func restoreKinds(c *checks, e *env, registry process.Registry, level logrus.Level) {
	b, err := newBackupRun("restore", registry, level)
	if !c.noErr(err, "the restore's logger and plugin manager are set up") {
		return
	}
	defer closeBackup(c, e, b)
	m := b.manager
	rias, err := m.GetRestoreItemActionsV2()
	if c.noErr(err, "GetRestoreItemActionsV2 (what the restore controller calls)") {
		bad := appliesTo(len(rias), func(i int) (string, error) { _, err := rias[i].AppliesTo(); return rias[i].Name(), err })
		c.ok(len(bad) == 0, fmt.Sprintf("AppliesTo answers on all %d RestoreItemActionV2s", len(rias)), bad)
	}
	v1, err := m.GetRestoreItemAction(prefix + "restore-v1")
	if c.noErr(err, "GetRestoreItemAction restore-v1") {
		fromBackup := object(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "namespace": "shop", "uid": "u-1"}})
		out, err := v1.Execute(&velero.RestoreItemActionExecuteInput{Item: configMap(), ItemFromBackup: fromBackup, Restore: restore()})
		if c.noErr(err, "RestoreItemAction Execute") {
			annotations := out.UpdatedItem.(*unstructured.Unstructured).GetAnnotations()
			c.ok(annotations["test.velero-wasm.io/from-backup-uid"] == "u-1", "itemFromBackup reaches the action", annotations)
			c.ok(!out.SkipRestore && ids(out.AdditionalItems) == "/secrets shop/cm", "restore additional items", ids(out.AdditionalItems))
		}
	}
	v2, err := m.GetRestoreItemActionV2(prefix + "restore-v2")
	if c.noErr(err, "GetRestoreItemActionV2 restore-v2") {
		out, err := v2.Execute(&velero.RestoreItemActionExecuteInput{Item: configMap(), ItemFromBackup: configMap(), Restore: restore()})
		if c.noErr(err, "RestoreItemActionV2 Execute") {
			c.ok(out.WaitForAdditionalItems && out.AdditionalItemsReadyTimeout == 90*time.Second && out.OperationID != "",
				"v2 restore: wait, timeout, operation", out)
			ready, err := v2.AreAdditionalItemsReady(out.AdditionalItems, restore())
			c.ok(err == nil && !ready, "AreAdditionalItemsReady: not yet", err)
			ready, err = v2.AreAdditionalItemsReady([]velero.ResourceIdentifier{id("", "configmaps", "shop", "cm")}, restore())
			c.ok(err == nil && ready, "AreAdditionalItemsReady: ready", err)
			p, err := v2.Progress(out.OperationID, restore())
			c.ok(err == nil && !p.Updated.IsZero(), "restore Progress", err, p)
			c.noErr(v2.Cancel(out.OperationID, restore()), "restore Cancel")
		}
	}
	c.counted(b, 0, 0, "a clean restore")
}

// deleteKind is `velero backup delete`'s calls: an action's own error is returned, and nothing else
// is counted.
func deleteKind(c *checks, e *env, registry process.Registry, level logrus.Level) {
	b, err := newBackupRun("delete", registry, level)
	if !c.noErr(err, "the deletion's logger and plugin manager are set up") {
		return
	}
	defer closeBackup(c, e, b)
	dias, err := b.manager.GetDeleteItemActions()
	if c.noErr(err, "GetDeleteItemActions") {
		bad := appliesTo(len(dias), func(i int) (string, error) { _, err := dias[i].AppliesTo(); return "", err })
		c.ok(len(bad) == 0, fmt.Sprintf("AppliesTo answers on all %d DeleteItemActions", len(dias)), bad)
	}
	dia, err := b.manager.GetDeleteItemAction(prefix + "delete")
	if c.noErr(err, "GetDeleteItemAction delete") {
		c.noErr(dia.Execute(&velero.DeleteItemActionExecuteInput{Item: configMap(), Backup: backup("nightly")}), "DeleteItemAction Execute")
		refused := object(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "namespace": "shop",
			"annotations": map[string]any{"test.velero-wasm.io/refuse-delete": ""}}})
		err := dia.Execute(&velero.DeleteItemActionExecuteInput{Item: refused, Backup: backup("nightly")})
		c.ok(err != nil && strings.Contains(err.Error(), "refusing to delete cm"), "an action's own error is returned with its message", err)
	}
	c.counted(b, 0, 0, "the plugin logs nothing Velero counts for a returned error")
}

// servingFailure: the serving module traps. Velero gets an error, logs the item as failed (one
// error), and the plugin adds nothing to the count; the next call is served.
func servingFailure(c *checks, e *env, registry process.Registry, level logrus.Level) {
	b, err := newBackupRun("failing", registry, level)
	if !c.noErr(err, "the backup's logger and plugin manager are set up") {
		return
	}
	defer closeBackup(c, e, b)
	trap, err := b.manager.GetBackupItemActionV2(prefix + "trap")
	if !c.noErr(err, "GetBackupItemActionV2 trap") {
		return
	}
	_, _, _, _, err = trap.Execute(configMap(), backup("failing"))
	c.ok(err != nil && strings.Contains(err.Error(), "deliberate panic"), "a trap is an error Velero gets, with the panic's message", err)
	if err != nil {
		b.itemFailed("cm", err)
	}
	c.counted(b, 0, 1, "one failed item")
	c.ok(b.logged(logrus.ErrorLevel, "Error backing up item", "deliberate panic"), "the error Velero counts names the trap")
	echo, err := b.manager.GetBackupItemActionV2(prefix + "echo")
	if c.noErr(err, "GetBackupItemActionV2 echo") {
		_, _, _, _, err = echo.Execute(configMap(), backup("failing"))
		c.noErr(err, "the plugin serves on after a trap")
	}
	c.counted(b, 0, 1, "still one failed item")
}

// killedMidBackup: the plugin process is killed while a call is in flight. That call fails (an
// error Velero counts for its item), Velero's restartable wrapper starts a new process at the next
// call, and that call succeeds.
func killedMidBackup(c *checks, e *env, registry process.Registry, level logrus.Level) {
	b, err := newBackupRun("killed", registry, level)
	if !c.noErr(err, "the backup's logger and plugin manager are set up") {
		return
	}
	var stale []string
	defer func() { closeBackup(c, e, b, stale...) }()
	sleep, err1 := b.manager.GetBackupItemActionV2(prefix + "sleep")
	echo, err2 := b.manager.GetBackupItemActionV2(prefix + "echo")
	if !c.noErr(errors.Join(err1, err2), "GetBackupItemActionV2 sleep and echo") {
		return
	}
	_, _, _, _, err = echo.Execute(configMap(), backup("killed"))
	c.noErr(err, "a first call is served")
	before := pluginPIDs()
	if !c.ok(len(before) == 1, "one plugin process serves the backup", before) {
		return
	}
	// SIGKILL leaves the socket behind: the one of the process killed.
	stale = e.sockets()
	done := make(chan error, 1)
	go func() { _, _, _, _, err := sleep.Execute(configMap(), backup("killed")); done <- err }()
	time.Sleep(500 * time.Millisecond)
	c.noErr(syscall.Kill(before[0], syscall.SIGKILL), "SIGKILL the plugin process mid-call")
	select {
	case err = <-done:
		c.ok(err != nil, "the call in flight fails", err)
		b.itemFailed("cm", err)
	case <-time.After(5 * time.Second):
		c.ok(false, "the call in flight fails at once")
	}
	// go-plugin notices the exit asynchronously: its wait goroutine logs "plugin process exited"
	// and only then marks the client exited, which is what Velero's wrapper checks at the next
	// call. A call that lands between the two still dials the dead process's socket and gets
	// Unavailable; the driver retries those (as the next item of a backup would) and counts them.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !b.logged(logrus.ErrorLevel, "plugin process exited") {
		time.Sleep(50 * time.Millisecond)
	}
	var item runtime.Unstructured
	raced := 0
	for {
		item, _, _, _, err = echo.Execute(configMap(), backup("killed"))
		if err == nil || !strings.Contains(err.Error(), "code = Unavailable") || time.Now().After(deadline) {
			break
		}
		raced++
		b.itemFailed("cm", err)
		time.Sleep(50 * time.Millisecond)
	}
	c.ok(err == nil && item != nil, fmt.Sprintf("a call after go-plugin marks the exit starts a new process and succeeds (%d raced the mark)", raced), err)
	after := pluginPIDs()
	c.ok(len(after) == 1 && after[0] != before[0], "a new plugin process serves", before, after)
	c.ok(b.logged(logrus.InfoLevel, "Plugin process exited - restarting"), "Velero logged the restart")
	// Velero's own accounting: go-plugin logs the killed process's exit at error, and Velero logs the
	// failed item (and each item that raced the exit mark): errors, none a line of the plugin.
	c.counted(b, 0, 2+raced, "a killed plugin: go-plugin's exit line and the failed items")
	c.ok(b.logged(logrus.ErrorLevel, "plugin process exited", "signal: killed"), "go-plugin's line names the signal")
	c.ok(len(stale) == 1, "the killed process's socket was its only one", stale)
}

// shadowed: a shadow module that differs, traps, hangs and logs at warn and error runs beside the
// serving one during a backup, and another shadow cannot be loaded. Velero's counts stay 0 and 0;
// `velero-wasm status` has it all.
func shadowed(c *checks, e *env, registry process.Registry, level logrus.Level) {
	// label → echo: a different item and additional items; echo → trap; counter → sleep (a hang
	// past the shadows' deadline); stdout → log (the shadow logs at every level).
	cm, err := shadowConfigMap("misbehave", filepath.Join(e.components, "misbehave.wasm"), "label:echo,echo:trap,counter:sleep,stdout:log")
	if !c.noErr(err, "the shadow's ConfigMap") {
		return
	}
	// And a shadow of `kinds` that cannot be loaded: its manifest names another component.
	broken, err := shadowConfigMap("kinds", filepath.Join(e.components, "kinds.wasm"), "")
	if !c.noErr(err, "the broken shadow's ConfigMap") {
		return
	}
	broken["data"] = map[string]any{"kinds.toml": "sha256 = \"" + strings.Repeat("0", 64) + "\"\n"}
	api, done, ok := servedConfigMaps(c, e, []map[string]any{cm, broken},
		map[string]string{"VELERO_WASM_SHADOW_TIMEOUT": "1s", "VELERO_WASM_SHADOW_IDLE": "2s", "VELERO_WASM_SHADOW_CALLS": "8"})
	if !ok {
		return
	}
	defer done()

	b, err := newBackupRun("shadowed", registry, level)
	if !c.noErr(err, "the backup's logger and plugin manager are set up") {
		return
	}
	defer closeBackup(c, e, b)
	for _, action := range []string{"label", "echo", "counter", "stdout"} {
		a, err := b.manager.GetBackupItemActionV2(prefix + action)
		if !c.noErr(err, "GetBackupItemActionV2 "+action) {
			return
		}
		item, extra, _, _, err := a.Execute(configMap(), backup("shadowed"))
		c.ok(err == nil && item != nil, "Velero gets the serving answer of "+action, err, ids(extra))
		if action == "label" {
			c.ok(item.(*unstructured.Unstructured).GetLabels()["velero-wasm.io/seen"] == "true" && len(extra) == 0,
				"label: the serving module's item, not the shadow's", item, ids(extra))
		}
	}
	// The shadow runs after the answers: wait until the status has all four.
	var figures map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		status, err := e.status()
		if err == nil {
			figures, _ = number2(status)
			if number(figures, "compared")+number(figures, "faults", "trap")+number(figures, "faults", "deadline") >= 4 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.ok(number(figures, "faults", "trap") == 1 && number(figures, "faults", "deadline") == 1 && number(figures, "differing") >= 1,
		"velero-wasm status shows the shadow's trap, hang and difference", figures)
	c.ok(len(api.unexpected()) == 0, "the plugin asked the API server only for the module ConfigMaps, and wrote only their state", api.unexpected())
	// Give the shadow's late lines (its hang ends at 1 s, the summary after 2 s idle) time to arrive.
	time.Sleep(3 * time.Second)
	c.ok(b.logged(logrus.InfoLevel, "shadow summary of backup shadowed"), "the shadow's summary is in the backup log, at info")
	c.ok(b.logged(logrus.InfoLevel, "kinds-candidate", "no shadow is loaded from it"), "the broken shadow is in the backup log, at info",
		b.entries(logrus.InfoLevel))
	c.counted(b, 0, 0, "a shadow that differs, traps, hangs and logs at warn and error, and one that cannot be loaded")
}

// number2 is the shadow figures of module misbehave in a status.
func number2(status map[string]any) (map[string]any, bool) {
	shadows, _ := status["shadows"].(map[string]any)
	m, ok := shadows["misbehave"].(map[string]any)
	return m, ok
}

// bigShadow is `make memory`'s shadow attack: a shadow of misbehave whose `echo` answers a 60 MB item
// of [0,0,…] (within the 64 MiB output limit) while the serving module answers the item unchanged.
// Four backups' calls are compared, by hash past the parsed-size bound, so each differs; Velero
// counts nothing; and the plugin stays within its memory cgroup (the caller measures that).
func bigShadow(c *checks, e *env, registry process.Registry, level logrus.Level) {
	cm, err := shadowConfigMap("misbehave", filepath.Join(e.components, "misbehave.wasm"), "echo:giant-output")
	if !c.noErr(err, "the shadow's ConfigMap") {
		return
	}
	// Within `make memory`'s 512 MiB the shadows' default memory (a quarter of the calls' budget, a
	// quarter of the cgroup's limit) has no room for misbehave's 256 MiB and drops the shadow: the
	// admin's way to compare one is to give the shadows more and the calls less (the serving echo
	// needs little).
	_, done, ok := servedConfigMaps(c, e, []map[string]any{cm},
		map[string]string{"VELERO_WASM_SHADOW_TIMEOUT": "30s", "VELERO_WASM_SHADOW_IDLE": "2s",
			"VELERO_WASM_SHADOW_MEMORY": "320MiB", "VELERO_WASM_MEMORY_BUDGET": "32MiB"})
	if !ok {
		return
	}
	defer done()

	b, err := newBackupRun("big-shadow", registry, level)
	if !c.noErr(err, "the backup's logger and plugin manager are set up") {
		return
	}
	defer closeBackup(c, e, b)
	a, err := b.manager.GetBackupItemActionV2(prefix + "echo")
	if !c.noErr(err, "GetBackupItemActionV2 echo") {
		return
	}
	// Figures count from what earlier scenarios in this run left in the status (the state is shared).
	var before, figures map[string]any
	if status, err := e.status(); err == nil {
		before, _ = number2(status)
	}
	since := func(key string) float64 { return number(figures, key) - number(before, key) }
	// One call at a time, each waiting for its comparison: the peak is one giant answer's, not four.
	for i := 1; i <= 4; i++ {
		item, _, _, _, err := a.Execute(configMap(), backup("big-shadow"))
		c.ok(err == nil && item != nil, fmt.Sprintf("call %d: Velero gets the serving answer", i), err)
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if status, err := e.status(); err == nil {
				figures, _ = number2(status)
				if since("compared") >= float64(i) {
					break
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	c.ok(since("compared") == 4 && since("differing") == 4,
		"velero-wasm status shows four more calls compared, each differing (the shadow's 60 MB item)", figures)
	c.counted(b, 0, 0, "a shadow answering 60 MB items")
}

// servedConfigMaps serves cms as the module ConfigMaps of Velero's namespace and points the plugin at
// them (KUBECONFIG, VELERO_WASM_CONFIGMAPS=on, and vars); done turns the ConfigMaps off again.
func servedConfigMaps(c *checks, e *env, cms []map[string]any, vars map[string]string) (api *configMapServer, done func(), ok bool) {
	api, err := startConfigMapServer(cms)
	if !c.noErr(err, "the ConfigMap list is served") {
		return nil, nil, false
	}
	kubeconfig := filepath.Join(e.work, "kubeconfig")
	if !c.noErr(api.kubeconfig(kubeconfig), "kubeconfig written") {
		return nil, nil, false
	}
	os.Setenv("KUBECONFIG", kubeconfig)
	os.Setenv("VELERO_WASM_CONFIGMAPS", "on")
	for k, v := range vars {
		os.Setenv(k, v)
	}
	return api, func() {
		os.Setenv("VELERO_WASM_CONFIGMAPS", "off")
		os.Unsetenv("KUBECONFIG")
		for k := range vars {
			os.Unsetenv(k)
		}
	}, true
}

// concurrentGets is `make memory`'s row for issue 55's first crash: 64 Executes at once through one
// plugin process (as Velero's item-block workers call one backup's actions), each running kube-probe's
// kube-get, one `get` that the API server of -gets-kubeconfig answers with a 15 MiB ConfigMap (the row's
// hostile server, mode big-gets), for a module of 64 MiB. The plugin must stay up: each call returns
// the length it read, or fails alone with the process's memory budget's message; the caller measures
// the peak of its memory cgroup. With views, each get is answered from the backup's read view (one
// listing of the namespace, shared), else from the API server.
func concurrentGets(c *checks, e *env, server logrus.FieldLogger, level logrus.Level, views bool) {
	const calls = 64
	if !c.ok(e.kubeconfig != "", "-gets-kubeconfig names the API server to read from") {
		return
	}
	os.Setenv("KUBECONFIG", e.kubeconfig)
	defer os.Unsetenv("KUBECONFIG")
	if !views {
		os.Setenv("VELERO_WASM_READ_VIEWS", "off")
		defer os.Unsetenv("VELERO_WASM_READ_VIEWS")
	}
	wasm, err := os.ReadFile(filepath.Join(e.components, "kube_probe.wasm"))
	if !c.noErr(err, "the kube-probe component is read") {
		return
	}
	modules := os.Getenv("VELERO_WASM_MODULES")
	sum := sha256.Sum256(wasm)
	manifest := "sha256 = \"" + hex.EncodeToString(sum[:]) + "\"\n[limits]\nmemory = \"64MiB\"\ntimeout = \"60s\"\n" +
		"[[grant.kube]]\nresources = [\"configmaps\"]\nverbs = [\"get\"]\nnamespaces = [\"@item\"]\n"
	if !c.noErr(firstErr(os.WriteFile(filepath.Join(modules, "kube-probe.wasm"), wasm, 0o644),
		os.WriteFile(filepath.Join(modules, "kube-probe.toml"), []byte(manifest), 0o644)), "kube-probe is added to the module directory") {
		return
	}
	// Velero lists a plugin's actions when it starts: a new registry sees kube-probe's.
	registry, err := discover(e.pluginDir, server, level)
	if !c.noErr(err, "the registry discovers the plugin directory again") {
		return
	}
	b, err := newBackupRun("concurrent-gets", registry, level)
	if !c.noErr(err, "the backup's logger and plugin manager are set up") {
		return
	}
	defer closeBackup(c, e, b)
	a, err := b.manager.GetBackupItemActionV2(prefix + "kube-get")
	if !c.noErr(err, "GetBackupItemActionV2 kube-get") {
		return
	}
	lengths, reports, errs := make([]float64, calls), make([]any, calls), make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			item, _, _, _, err := a.Execute(configMap(), backup("concurrent-gets"))
			errs[i] = err
			if err == nil && item != nil {
				reports[i] = item.UnstructuredContent()["report"]
				// An unstructured item holds JSON integers as int64.
				if m, ok := reports[i].(map[string]any); ok {
					length, _ := m["length"].(int64)
					lengths[i] = float64(length)
				}
			}
		}()
	}
	wg.Wait()
	// A call fails alone when its own limit says no: the memory budget, or its deadline (on two busy
	// cores a debug build's 64 parses of 15 MiB can outlast a minute). An error of the connection
	// (the plugin killed) or any other is a failure.
	read, refused, late, other := 0, 0, 0, []string{}
	for i := range calls {
		switch {
		case errs[i] == nil && lengths[i] >= 15<<20:
			read++
		case errs[i] != nil && strings.Contains(errs[i].Error(), "memory budget of"):
			refused++
		case errs[i] != nil && strings.Contains(errs[i].Error(), "did not finish within its deadline"):
			late++
		default:
			other = append(other, fmt.Sprintf("call %d: report %v, error %v", i, reports[i], errs[i]))
		}
	}
	c.ok(len(other) == 0, fmt.Sprintf("each of %d concurrent calls read its 15 MiB answer or failed alone with the memory budget's message or its deadline's", calls), other)
	c.ok(read > 0, fmt.Sprintf("%d calls read their answer, %d were refused by the memory budget, %d ran out of time", read, refused, late))
}
