// Command interop plays Velero against velero-wasm with the real hashicorp go-plugin client.
//
// It starts the binary exactly as Velero's plugin manager does (go-plugin's handshake: protocol
// version 2, magic cookie VELERO_PLUGIN=hello, gRPC only; Velero 1.14 and 1.15+ style arguments),
// lists the plugins, calls AppliesTo on every one and the kind's calls on the test actions, through
// stubs generated from velero-wasm's own .proto files, then Kill()s the client as Velero does at the
// end of a backup and checks that the process exited by itself within 2 s and removed its socket.
//
// Usage: interop -binary target/debug/velero-wasm -modules DIR
// It prints one line per check and exits 1 if any failed.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	biav2 "velerowasm/backupitemaction/v2"
	pb "velerowasm/generated"
	ibav1 "velerowasm/itemblockaction/v1"
	goplugin "velerowasm/plugin"
	riav2 "velerowasm/restoreitemaction/v2"

	"github.com/golang/protobuf/ptypes/empty"
)

const prefix = "test.velero-wasm.io/"

// The handshake Velero uses (pkg/plugin/framework/handshake.go).
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  2,
	MagicCookieKey:   "VELERO_PLUGIN",
	MagicCookieValue: "hello",
}

// Every kind Velero dispenses; each gives the raw connection, wrapped below in our generated stubs
// the way Velero's framework wraps it in its own.
var kinds = []string{
	"BackupItemAction", "BackupItemActionV2", "RestoreItemAction", "RestoreItemActionV2",
	"DeleteItemAction", "ItemBlockAction", "PluginLister",
}

type connPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (connPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("this is a client")
}

func (connPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (interface{}, error) {
	return c, nil
}

// checks counts what passed and failed.
type checks struct {
	passed, failed int
	scenario       string
}

func (c *checks) ok(cond bool, what string, detail ...interface{}) bool {
	if cond {
		c.passed++
		fmt.Printf("ok    [%s] %s\n", c.scenario, what)
	} else {
		c.failed++
		fmt.Printf("FAIL  [%s] %s %s\n", c.scenario, what, fmt.Sprint(detail...))
	}
	return cond
}

func (c *checks) noErr(err error, what string) bool {
	return c.ok(err == nil, what, err)
}

// lockedBuffer collects the client's own log (JSON lines), which includes the plugin's stderr lines
// as go-plugin parsed them.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) entries() []map[string]interface{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]interface{}
	for _, line := range strings.Split(b.buf.String(), "\n") {
		var e map[string]interface{}
		if json.Unmarshal([]byte(line), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

func main() {
	binary := flag.String("binary", "target/debug/velero-wasm", "the velero-wasm binary")
	modules := flag.String("modules", "", "VELERO_WASM_MODULES for the plugin: the test components")
	flag.Parse()
	if *modules != "" {
		os.Setenv("VELERO_WASM_MODULES", *modules)
	}
	c := &checks{}
	// Velero 1.14: `--log-level <lvl> --features <csv>`, and no ItemBlockAction.
	run(c, "velero-1.14", *binary, []string{"--log-level", "debug", "--features", "EnableCSI"},
		"BackupItemAction,BackupItemActionV2,RestoreItemAction,RestoreItemActionV2,DeleteItemAction")
	// Velero 1.15+: every `velero server` argument, in every form.
	run(c, "velero-1.15", *binary, []string{"--uploader-type=kopia", "--features=EnableCSI", "--restore-only",
		"--log-level=debug", "--default-volumes-to-fs-backup=true", "--item-block-worker-count", "2"}, "")
	c.scenario = "summary"
	fmt.Printf("interop: %d passed, %d failed\n", c.passed, c.failed)
	if c.failed > 0 {
		os.Exit(1)
	}
}

func run(c *checks, scenario, binary string, args []string, kindsEnv string) {
	c.scenario = scenario
	logs := &lockedBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "velero", Level: hclog.Trace, JSONFormat: true, Output: logs})
	cmd := exec.Command(binary, args...)
	if kindsEnv != "" {
		cmd.Env = []string{"VELERO_WASM_KINDS=" + kindsEnv}
	}
	pluginMap := map[string]plugin.Plugin{}
	for _, k := range kinds {
		pluginMap[k] = connPlugin{}
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  handshake,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Plugins:          pluginMap,
		Cmd:              cmd,
		Logger:           logger,
	})
	defer client.Kill()

	addr, err := client.Start()
	if !c.noErr(err, "the handshake is accepted") {
		return
	}
	c.ok(addr.Network() == "unix", "the plugin listens on a Unix socket", addr)
	socket := addr.String()
	rpc, err := client.Client()
	if !c.noErr(err, "the gRPC client connects (broker stream opened)") {
		return
	}
	c.noErr(rpc.Ping(), "health: service \"plugin\" is SERVING")
	raw, err := rpc.Dispense("PluginLister")
	if !c.noErr(err, "dispense") {
		return
	}
	conn := raw.(*grpc.ClientConn)
	ctx := context.Background()

	// go-plugin 1.6 (Velero 1.14+) opens StreamStdio at once; Debian's older client does not, so open it
	// here as the newer one would, and keep it open across the calls.
	stdioCtx, stopStdio := context.WithCancel(ctx)
	stdio, err := goplugin.NewGRPCStdioClient(conn).StreamStdio(stdioCtx, &empty.Empty{})
	stdioDone := make(chan error, 1)
	if c.noErr(err, "StreamStdio opens") {
		go func() { _, err := stdio.Recv(); stdioDone <- err }()
	}

	listed := listPlugins(c, ctx, conn, binary, kindsEnv != "")
	for _, p := range listed {
		appliesTo(c, ctx, conn, p)
	}
	exercise(c, ctx, conn, kindsEnv == "")

	select {
	case err := <-stdioDone:
		c.ok(false, "StreamStdio stays open while the plugin serves", err)
	default:
		c.ok(true, "StreamStdio stays open while the plugin serves")
	}
	stopStdio()
	select {
	case err := <-stdioDone:
		c.ok(status.Code(err) == codes.Canceled, "StreamStdio ends when the client cancels it", err)
	case <-time.After(5 * time.Second):
		c.ok(false, "StreamStdio ends when the client cancels it")
	}

	// Velero's CleanupClients: Kill() = Shutdown, close, wait up to 2 s, else SIGKILL.
	start := time.Now()
	client.Kill()
	elapsed := time.Since(start)
	c.ok(elapsed < 2*time.Second, "Kill() returns without go-plugin's 2 s forced kill", elapsed)
	c.ok(client.Exited(), "the plugin process has exited")
	_, statErr := os.Stat(socket)
	c.ok(os.IsNotExist(statErr), "the socket file is removed", socket)

	// What go-plugin made of the plugin's stderr and of its exit.
	var forced, exited, exitedClean, guestInfo, serving, loaded bool
	for _, e := range logs.entries() {
		msg, _ := e["@message"].(string)
		level, _ := e["@level"].(string)
		switch {
		case msg == "plugin failed to exit gracefully":
			forced = true
		case msg == "plugin process exited":
			_, failed := e["error"]
			exited, exitedClean = true, !failed
		case msg == "backing up" && level == "info":
			guestInfo = e["step"] == "inspect" && e["namespace"] == "shop" && e["name"] == "cm" &&
				e["action"] == prefix+"backup-v1" && e["resource"] == "configmaps"
		case msg == "serving Velero's plugin protocol" && level == "info":
			_, hasKinds := e["kinds"]
			serving = hasKinds
		case msg == "modules loaded" && level == "debug":
			loaded = true
		}
	}
	c.ok(exited && exitedClean && !forced, "go-plugin logged a clean exit (status 0, no forced kill)")
	c.ok(serving, "go-plugin parsed the plugin's start-up line at info level, with the kinds listed")
	c.ok(loaded, "go-plugin parsed the plugin's debug JSON line at debug level")
	c.ok(guestInfo, "go-plugin parsed the guest's info line, with its action, item and fields")
}

func listPlugins(c *checks, ctx context.Context, conn *grpc.ClientConn, binary string, for114 bool) []*pb.PluginIdentifier {
	resp, err := pb.NewPluginListerClient(conn).ListPlugins(ctx, &pb.Empty{})
	if !c.noErr(err, "ListPlugins") {
		return nil
	}
	known := map[string]bool{"BackupItemAction": true, "BackupItemActionV2": true, "RestoreItemAction": true,
		"RestoreItemActionV2": true, "DeleteItemAction": true, "ItemBlockAction": !for114}
	seen := map[string]bool{}
	commandOK, kindsOK, unique := true, true, true
	var names []string
	for _, p := range resp.Plugins {
		commandOK = commandOK && p.Command == binary
		kindsOK = kindsOK && known[p.Kind]
		unique = unique && !seen[p.Kind+" "+p.Name]
		seen[p.Kind+" "+p.Name] = true
		names = append(names, p.Kind+" "+p.Name)
	}
	c.ok(len(resp.Plugins) > 0, "ListPlugins lists plugins", len(resp.Plugins))
	c.ok(commandOK, "every command is the path Velero started", binary)
	c.ok(kindsOK, "every kind is one this Velero accepts", names)
	c.ok(unique, "no (kind, name) is listed twice")
	for _, want := range []string{"BackupItemAction backup-v1", "BackupItemActionV2 backup-v2", "RestoreItemAction restore-v1",
		"RestoreItemActionV2 restore-v2", "DeleteItemAction delete", "ItemBlockAction item-block"} {
		parts := strings.SplitN(want, " ", 2)
		expected := !(for114 && parts[0] == "ItemBlockAction")
		c.ok(seen[parts[0]+" "+prefix+parts[1]] == expected, fmt.Sprintf("%s listed: %v", want, expected))
	}
	sorted := sort.SliceIsSorted(resp.Plugins, func(i, j int) bool {
		a, b := resp.Plugins[i], resp.Plugins[j]
		if a.Kind != b.Kind {
			return kindOrder(a.Kind) < kindOrder(b.Kind)
		}
		return a.Name < b.Name
	})
	c.ok(sorted, "listed in the Go framework's order", names)
	return resp.Plugins
}

func kindOrder(kind string) int {
	for i, k := range []string{"BackupItemAction", "BackupItemActionV2", "RestoreItemAction", "RestoreItemActionV2", "DeleteItemAction", "ItemBlockAction"} {
		if k == kind {
			return i
		}
	}
	return 99
}

func appliesTo(c *checks, ctx context.Context, conn *grpc.ClientConn, p *pb.PluginIdentifier) {
	var sel *pb.ResourceSelector
	var err error
	switch p.Kind {
	case "BackupItemAction":
		var r *pb.BackupItemActionAppliesToResponse
		r, err = pb.NewBackupItemActionClient(conn).AppliesTo(ctx, &pb.BackupItemActionAppliesToRequest{Plugin: p.Name})
		sel = r.GetResourceSelector()
	case "BackupItemActionV2":
		var r *biav2.BackupItemActionAppliesToResponse
		r, err = biav2.NewBackupItemActionClient(conn).AppliesTo(ctx, &biav2.BackupItemActionAppliesToRequest{Plugin: p.Name})
		sel = r.GetResourceSelector()
	case "RestoreItemAction":
		var r *pb.RestoreItemActionAppliesToResponse
		r, err = pb.NewRestoreItemActionClient(conn).AppliesTo(ctx, &pb.RestoreItemActionAppliesToRequest{Plugin: p.Name})
		sel = r.GetResourceSelector()
	case "RestoreItemActionV2":
		var r *riav2.RestoreItemActionAppliesToResponse
		r, err = riav2.NewRestoreItemActionClient(conn).AppliesTo(ctx, &riav2.RestoreItemActionAppliesToRequest{Plugin: p.Name})
		sel = r.GetResourceSelector()
	case "ItemBlockAction":
		var r *ibav1.ItemBlockActionAppliesToResponse
		r, err = ibav1.NewItemBlockActionClient(conn).AppliesTo(ctx, &ibav1.ItemBlockActionAppliesToRequest{Plugin: p.Name})
		sel = r.GetResourceSelector()
	case "DeleteItemAction":
		var r *pb.DeleteItemActionAppliesToResponse
		r, err = pb.NewDeleteItemActionClient(conn).AppliesTo(ctx, &pb.DeleteItemActionAppliesToRequest{Plugin: p.Name})
		sel = r.GetResourceSelector()
	}
	c.ok(err == nil && sel != nil, "AppliesTo "+p.Kind+" "+p.Name+" answers a selector", err)
	if p.Name == prefix+"backup-v1" && sel != nil {
		c.ok(strings.Join(sel.IncludedResources, ",") == "configmaps,pods" && strings.Join(sel.ExcludedNamespaces, ",") == "kube-system",
			"the selector's fields arrive by number", sel)
	}
}

var (
	backup  = []byte(`{"metadata":{"name":"nightly","namespace":"velero"},"spec":{"includedNamespaces":["*"]},"status":{"phase":"InProgress"}}`)
	restore = []byte(`{"metadata":{"name":"nightly-restore","namespace":"velero"},"spec":{"backupName":"nightly"}}`)
	cm      = []byte(`{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":"cm","namespace":"shop"}}`)
	pod     = []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"db-0","namespace":"shop"},"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"data-db-0"}}]}}`)
)

func id(group, resource, namespace, name string) string {
	return fmt.Sprintf("%s/%s %s/%s", group, resource, namespace, name)
}

func ids(list []*pb.ResourceIdentifier) string {
	var out []string
	for _, r := range list {
		out = append(out, id(r.Group, r.Resource, r.Namespace, r.Name))
	}
	return strings.Join(out, ", ")
}

// exercise calls every kind's calls on the test actions, and checks what comes back.
func exercise(c *checks, ctx context.Context, conn *grpc.ClientConn, itemBlock bool) {
	bia := pb.NewBackupItemActionClient(conn)
	r1, err := bia.Execute(ctx, &pb.ExecuteRequest{Plugin: prefix + "backup-v1", Item: cm, Backup: backup})
	if c.noErr(err, "BackupItemAction Execute") {
		c.ok(bytes.Equal(r1.Item, cm), "an unchanged item comes back byte for byte")
		c.ok(ids(r1.AdditionalItems) == id("", "persistentvolumeclaims", "shop", "cm-data")+", "+id("apps", "deployments", "shop", "cm"),
			"additional items: plural resources, groups without versions", ids(r1.AdditionalItems))
	}
	_, err = bia.Execute(ctx, &pb.ExecuteRequest{Plugin: "example.io/nope", Item: cm, Backup: backup})
	c.ok(status.Code(err) == codes.Unknown && strings.Contains(status.Convert(err).Message(), "example.io/nope was not found"),
		"an unknown plugin name is an UNKNOWN status", err)
	_, err = bia.Execute(ctx, &pb.ExecuteRequest{Plugin: prefix + "backup-v1", Item: nil, Backup: backup})
	c.ok(status.Code(err) == codes.InvalidArgument && strings.Contains(err.Error(), "unexpected end of JSON input"), "an empty item is refused clearly", err)

	bia2 := biav2.NewBackupItemActionClient(conn)
	r2, err := bia2.Execute(ctx, &biav2.ExecuteRequest{Plugin: prefix + "backup-v2", Item: cm, Backup: backup})
	if c.noErr(err, "BackupItemActionV2 Execute") {
		c.ok(bytes.Equal(r2.Item, cm) && strings.HasPrefix(r2.OperationID, "op-"), "v2 Execute returns the item and an operation", r2.OperationID)
		c.ok(ids(r2.PostOperationItems) == id("", "configmaps", "shop", "cm"), "post-operation items arrive", ids(r2.PostOperationItems))
		p, err := bia2.Progress(ctx, &biav2.BackupItemActionProgressRequest{Plugin: prefix + "backup-v2", OperationID: r2.OperationID, Backup: backup})
		c.ok(err == nil && p.Progress != nil && p.Progress.Started != nil && p.Progress.Started.Seconds > 0 && p.Progress.NTotal == 1000,
			"Progress sets progress and its start", err, p)
		_, err = bia2.Cancel(ctx, &biav2.BackupItemActionCancelRequest{Plugin: prefix + "backup-v2", OperationID: r2.OperationID, Backup: backup})
		c.noErr(err, "Cancel")
	}
	_, err = bia2.Progress(ctx, &biav2.BackupItemActionProgressRequest{Plugin: prefix + "backup-v2", OperationID: "bogus", Backup: backup})
	c.ok(status.Convert(err).Message() == "operation ID bogus is invalid", "Progress of an unknown operation fails", err)

	ria := pb.NewRestoreItemActionClient(conn)
	r3, err := ria.Execute(ctx, &pb.RestoreItemActionExecuteRequest{Plugin: prefix + "restore-v1", Item: cm, Restore: restore,
		ItemFromBackup: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"shop","uid":"u-1"}}`)})
	if c.noErr(err, "RestoreItemAction Execute") {
		c.ok(bytes.Contains(r3.Item, []byte(`"test.velero-wasm.io/from-backup-uid":"u-1"`)), "itemFromBackup reaches the action", string(r3.Item))
		c.ok(!r3.SkipRestore && ids(r3.AdditionalItems) == id("", "secrets", "shop", "cm"), "restore additional items", ids(r3.AdditionalItems))
	}

	ria2 := riav2.NewRestoreItemActionClient(conn)
	r4, err := ria2.Execute(ctx, &riav2.RestoreItemActionExecuteRequest{Plugin: prefix + "restore-v2", Item: cm, Restore: restore, ItemFromBackup: cm})
	if c.noErr(err, "RestoreItemActionV2 Execute") {
		timeout := r4.AdditionalItemsReadyTimeout
		c.ok(bytes.Equal(r4.Item, cm) && r4.WaitForAdditionalItems && timeout != nil && timeout.Seconds == 90 && r4.OperationID != "",
			"v2 restore: item, wait, timeout, operation", r4)
		ready, err := ria2.AreAdditionalItemsReady(ctx, &riav2.RestoreItemActionItemsReadyRequest{Plugin: prefix + "restore-v2", Restore: restore, AdditionalItems: r4.AdditionalItems})
		c.ok(err == nil && !ready.Ready, "AreAdditionalItemsReady: not yet", err)
		ready, err = ria2.AreAdditionalItemsReady(ctx, &riav2.RestoreItemActionItemsReadyRequest{Plugin: prefix + "restore-v2", Restore: restore,
			AdditionalItems: []*pb.ResourceIdentifier{{Resource: "configmaps", Namespace: "shop", Name: "cm"}}})
		c.ok(err == nil && ready.Ready, "AreAdditionalItemsReady: ready", err)
		p, err := ria2.Progress(ctx, &riav2.RestoreItemActionProgressRequest{Plugin: prefix + "restore-v2", OperationID: r4.OperationID, Restore: restore})
		c.ok(err == nil && p.Progress != nil && p.Progress.Updated != nil, "restore Progress", err)
		_, err = ria2.Cancel(ctx, &riav2.RestoreItemActionCancelRequest{Plugin: prefix + "restore-v2", OperationID: r4.OperationID, Restore: restore})
		c.noErr(err, "restore Cancel")
	}

	if itemBlock {
		r5, err := ibav1.NewItemBlockActionClient(conn).GetRelatedItems(ctx, &ibav1.ItemBlockActionGetRelatedItemsRequest{Plugin: prefix + "item-block", Item: pod, Backup: backup})
		c.ok(err == nil && ids(r5.GetRelatedItems()) == id("", "persistentvolumeclaims", "shop", "data-db-0"), "ItemBlockAction GetRelatedItems", err, ids(r5.GetRelatedItems()))
	}

	dia := pb.NewDeleteItemActionClient(conn)
	_, err = dia.Execute(ctx, &pb.DeleteItemActionExecuteRequest{Plugin: prefix + "delete", Item: cm, Backup: backup})
	c.noErr(err, "DeleteItemAction Execute")
	_, err = dia.Execute(ctx, &pb.DeleteItemActionExecuteRequest{Plugin: prefix + "delete", Backup: backup,
		Item: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"shop","annotations":{"test.velero-wasm.io/refuse-delete":""}}}`)})
	c.ok(status.Code(err) == codes.Unknown && strings.Contains(err.Error(), "refusing to delete cm"), "a guest error is an UNKNOWN status with its message", err)

	// A guest panic, then more calls: the plugin keeps serving.
	_, err = bia.Execute(ctx, &pb.ExecuteRequest{Plugin: prefix + "trap", Item: cm, Backup: backup})
	c.ok(status.Code(err) == codes.Aborted && strings.Contains(err.Error(), "deliberate panic"), "a guest panic is an ABORTED status", err)

	// Sixteen Executes at once on the one connection.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := bia.Execute(ctx, &pb.ExecuteRequest{Plugin: prefix + "backup-v1", Item: cm, Backup: backup})
			if err == nil && !bytes.Equal(r.Item, cm) {
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
}
