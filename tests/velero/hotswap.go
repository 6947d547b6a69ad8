package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt/process"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// The slot through which velero-wasm serves backup actions added since Velero listed (docs/modules.md#s10).
const backupSlot = "velero-wasm.io/added-backup-actions"

// discoveryHelper resolves the resources of these scenarios as a cluster's discovery does (Velero's
// discovery.Helper, as its action resolver uses it); any other resource cannot be resolved.
type discoveryHelper struct{}

var knownResources = map[string]string{"configmaps": "", "pods": "", "persistentvolumeclaims": "", "secrets": "", "deployments": "apps"}

func (discoveryHelper) Resources() []*metav1.APIResourceList { return nil }
func (discoveryHelper) ResourceFor(in schema.GroupVersionResource) (schema.GroupVersionResource, metav1.APIResource, error) {
	group, ok := knownResources[in.Resource]
	if !ok || (in.Group != "" && in.Group != group) {
		return schema.GroupVersionResource{}, metav1.APIResource{}, fmt.Errorf("no resource %s", in.GroupResource())
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: in.Resource}
	return gvr, metav1.APIResource{Name: in.Resource, Group: group, Version: "v1"}, nil
}
func (discoveryHelper) KindFor(schema.GroupVersionKind) (schema.GroupVersionResource, metav1.APIResource, error) {
	return schema.GroupVersionResource{}, metav1.APIResource{}, errors.New("not needed")
}
func (discoveryHelper) Refresh() error               { return nil }
func (discoveryHelper) APIGroups() []metav1.APIGroup { return nil }
func (discoveryHelper) ServerVersion() *version.Info { return &version.Info{Major: "1", Minor: "34"} }

// resolved is what Velero's backup does first: every BackupItemActionV2 of the registry, resolved
// through its AppliesTo (framework.BackupItemActionResolverV2, with the discovery helper above).
func resolved(b *backupRun) ([]framework.BackupItemResolvedActionV2, error) {
	actions, err := b.manager.GetBackupItemActionsV2()
	if err != nil {
		return nil, err
	}
	return framework.NewBackupItemActionResolverV2(actions).ResolveActions(discoveryHelper{}, b.log)
}

// used are the names of the resolved actions Velero would call for `item` of `resource`, in order.
func used(actions []framework.BackupItemResolvedActionV2, resource string, item *unstructured.Unstructured, log logrus.FieldLogger) []string {
	var names []string
	for _, a := range actions {
		if a.ShouldUse(schema.GroupResource{Group: knownResources[resource], Resource: resource}, item.GetNamespace(), item, log) {
			names = append(names, a.Name())
		}
	}
	return names
}

func contains(list []string, name string) bool {
	for _, n := range list {
		if n == name {
			return true
		}
	}
	return false
}

// trail is the order in which the test module's `trail` actions saw an item.
func trail(item any) string {
	u, ok := item.(*unstructured.Unstructured)
	if !ok {
		return fmt.Sprintf("not an object: %T", item)
	}
	return u.GetAnnotations()["velero-wasm.io/trail"]
}

// hotSwap: modules applied as ConfigMaps while Velero runs. Velero's registry listed at its start
// (the driver's `registry`); a module added after that is called in the next backup through the
// slot, not before; two chain in name order; a removed one is no longer called; a new registry (a
// Velero restart) calls it by its own name only; an operation a slot-served action started is
// followed through the slot whichever registry asks. With nothing added, Velero calls the slot for
// no item, and counts nothing for it.
func hotSwap(c *checks, e *env, registry process.Registry, server logrus.FieldLogger, level logrus.Level) {
	misbehave := filepath.Join(e.components, "misbehave.wasm")
	kinds := filepath.Join(e.components, "kinds.wasm")
	trailA, errA := addedConfigMap("added-a", misbehave, map[string]string{"domain": "a.added.test", "cases": "trail"})
	trailB, errB := addedConfigMap("added-b", misbehave, map[string]string{"domain": "b.added.test", "cases": "trail"})
	kindsAdded, errK := addedConfigMap("kinds-added", kinds, map[string]string{"domain": "kinds.added.test"})
	if !c.noErr(firstErr(errA, errB, errK), "the added modules' ConfigMaps") {
		return
	}
	api, done, ok := servedConfigMaps(c, e, nil, nil)
	if !ok {
		return
	}
	defer done()
	items := map[string]*unstructured.Unstructured{"configmaps": configMap(), "pods": pod()}

	// 1. Nothing added yet: the slot applies to no item, and Velero counts nothing for it.
	b, err := newBackupRun("before-add", registry, level)
	if !c.noErr(err, "backup before-add is set up") {
		return
	}
	actions, err := resolved(b)
	if c.noErr(err, "Velero resolves every backup action, the slot included") {
		before := map[string]int{}
		for resource, item := range items {
			names := used(actions, resource, item, b.log)
			before[resource] = len(names)
			c.ok(!contains(names, backupSlot), "with nothing added Velero calls no slot for "+resource, names)
		}
		c.ok(before["configmaps"] > 0, "the modules Velero listed still apply", before)
	}
	slot, err := b.manager.GetBackupItemActionV2(backupSlot)
	if c.noErr(err, "the backup slot is registered") {
		item, extra, op, _, err := slot.Execute(configMap(), backup("before-add"))
		c.ok(err == nil && trail(item) == "" && len(extra) == 0 && op == "", "the slot leaves an item unchanged while nothing is added", err, ids(extra))
	}
	c.counted(b, 0, 0, "a backup with nothing added")
	closeBackup(c, e, b)

	// 2. Two modules added while Velero runs: the next backup calls both, in name order, through the slot.
	api.set([]map[string]any{trailB, trailA, kindsAdded})
	b, err = newBackupRun("added", registry, level)
	if !c.noErr(err, "backup added is set up") {
		return
	}
	var operation string
	if actions, err := resolved(b); c.noErr(err, "Velero resolves the slot's AppliesTo") {
		names := used(actions, "configmaps", configMap(), b.log)
		c.ok(contains(names, backupSlot), "the slot applies to the ConfigMap", names)
		c.ok(!contains(names, "a.added.test/trail"), "the added action is not registered under its own name", names)
	}
	if slot, err := b.manager.GetBackupItemActionV2(backupSlot); c.noErr(err, "the backup slot") {
		item, extra, op, post, err := slot.Execute(configMap(), backup("added"))
		c.ok(err == nil && trail(item) == "a.added.test/trail,b.added.test/trail", "both added actions ran, in name order, each on the last one's output", err, trail(item))
		// kinds' backup-v1 names a PVC and a Deployment; backup-v2 starts an operation.
		c.ok(ids(extra) == "/persistentvolumeclaims shop/cm-data, apps/deployments shop/cm", "the added kinds' additional items, once each", ids(extra))
		c.ok(strings.HasPrefix(op, `[["kinds.added.test/backup-v2","op-`), "the operation id names the action that started it", op)
		c.ok(ids(post) == "/configmaps shop/cm", "its post-operation items", ids(post))
		operation = op
		if operation != "" {
			progress, err := slot.Progress(operation, backup("added"))
			c.ok(err == nil && progress.NTotal > 0, "Progress of the slot's operation reaches the action that started it", err, progress)
		}
	}
	c.counted(b, 0, 0, "a backup with two modules added")
	closeBackup(c, e, b)

	// 3. One removed: no longer called.
	api.set([]map[string]any{trailA, kindsAdded})
	b, err = newBackupRun("removed", registry, level)
	if !c.noErr(err, "backup removed is set up") {
		return
	}
	if slot, err := b.manager.GetBackupItemActionV2(backupSlot); c.noErr(err, "the backup slot") {
		item, _, _, _, err := slot.Execute(configMap(), backup("removed"))
		c.ok(err == nil && trail(item) == "a.added.test/trail", "the removed module is no longer called", err, trail(item))
	}
	c.counted(b, 0, 0, "a backup after a module was removed")
	closeBackup(c, e, b)

	// 4. Velero restarts: its new registry lists the added actions by their own names, and the slot
	// serves them no more.
	restarted, err := discover(e.pluginDir, server, level)
	if !c.noErr(err, "a new registry (Velero restarted) discovers the plugin directory") {
		return
	}
	c.ok(contains(ours(restarted, "BackupItemAction", e), "a.added.test/trail"), "the new registry lists the added action by its own name",
		ours(restarted, "BackupItemAction", e))
	b, err = newBackupRun("restarted", restarted, level)
	if !c.noErr(err, "backup restarted is set up") {
		return
	}
	defer closeBackup(c, e, b)
	actions, err = resolved(b)
	if c.noErr(err, "Velero resolves the backup actions of the new registry") {
		names := used(actions, "configmaps", configMap(), b.log)
		c.ok(!contains(names, backupSlot) && contains(names, "a.added.test/trail"), "the action is called by its own name, the slot not at all", names)
		// Velero's own loop over the actions the ConfigMap gets, limited to the added module's and the slot.
		var item any = configMap()
		for _, a := range actions {
			if !contains(names, a.Name()) || (a.Name() != backupSlot && !strings.HasPrefix(a.Name(), "a.added.test/")) {
				continue
			}
			out, _, _, _, err := a.Execute(item.(*unstructured.Unstructured), backup("restarted"))
			if !c.noErr(err, "Execute "+a.Name()) {
				return
			}
			item = out
		}
		c.ok(trail(item) == "a.added.test/trail", "the added action ran once, never twice", trail(item))
	}
	if operation != "" {
		slot, err := b.manager.GetBackupItemActionV2(backupSlot)
		if c.noErr(err, "the backup slot of the new registry") {
			progress, err := slot.Progress(operation, backup("added"))
			c.ok(err == nil && progress.NTotal > 0, "after the restart, Progress of the operation started through the slot still reaches its action", err, progress)
		}
	}
	c.ok(len(api.unexpected()) == 0, "the plugin asked the API server only for the module ConfigMaps, and wrote only their state", api.unexpected())
	writes := strings.Join(api.stateWrites(), " ")
	c.ok(strings.Contains(writes, "PATCH /api/v1/namespaces/velero/configmaps/velero-wasm-module-added-a") &&
		strings.Contains(writes, "POST /api/v1/namespaces/velero/events"),
		"the added modules' ConfigMaps were told what became of them (status annotation, Events)", writes)
	c.counted(b, 0, 0, "a backup after Velero restarted")
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
