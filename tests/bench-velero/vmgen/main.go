// Command vmgen writes the objects of N running KubeVirt VMs for `make bench-velero`
// (tests/bench-velero/run.sh), each a copy of the fixture VM fedora-web-01 and what it has in a real
// cluster, made its own as host/benches/scale.rs makes them: the VM's name in every text, the names
// of the template's objects that carry neither it nor a uid of theirs (web-content, the hotplug pod
// hp-volume-m4tq9, …; PersistentVolumes are named after their claim's uid) suffixed with the VM's
// number wherever they are quoted, and every uid of the templates replaced by one of the copy's.
//
//	vmgen -vm fedora-web-01 -namespace vm-workloads \
//	      -per-vm DIR -per-namespace DIR -vms 100 -namespaces 4 -prefix vms -out DIR
//
// -per-vm holds the template VM's objects as JSON files (its VMI, launcher and hotplug pods,
// DataVolume, PVCs and their PersistentVolumes, Secrets, ControllerRevisions), -per-namespace what
// every namespace needs once (the Namespace, its ServiceAccounts, the NetworkAttachmentDefinition,
// the ConfigMap, the preference). Namespaces are PREFIX-0 … PREFIX-(K-1); VM i is vm-NNNNN in
// namespace i mod K. Writes one file per object into -out (created; it must be empty) and prints
// how many it wrote.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type template struct {
	file string
	text string
}

func readDir(dir string) ([]template, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []template
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, template{e.Name(), string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].file < out[j].file })
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no .json file", dir)
	}
	return out, nil
}

// identity is the object's name and its metadata.uid, if it has one of a UUID's length.
func identity(t template) (name, uid string, err error) {
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(t.text), &obj); err != nil {
		return "", "", fmt.Errorf("%s: %w", t.file, err)
	}
	if len(obj.Metadata.UID) != 36 {
		return obj.Metadata.Name, "", nil
	}
	return obj.Metadata.Name, obj.Metadata.UID, nil
}

func run() error {
	vm := flag.String("vm", "fedora-web-01", "the template VM's name")
	namespace := flag.String("namespace", "vm-workloads", "the templates' namespace")
	perVM := flag.String("per-vm", "", "directory of the template VM's objects (JSON)")
	perNamespace := flag.String("per-namespace", "", "directory of the objects every namespace has once (JSON)")
	vms := flag.Int("vms", 100, "how many VMs")
	namespaces := flag.Int("namespaces", 4, "over how many namespaces")
	prefix := flag.String("prefix", "vms", "the namespaces' prefix")
	out := flag.String("out", "", "directory to write the objects into (empty or missing)")
	flag.Parse()
	if *perVM == "" || *perNamespace == "" || *out == "" || *vms < 1 || *namespaces < 1 {
		flag.Usage()
		return fmt.Errorf("-per-vm, -per-namespace and -out are needed, -vms and -namespaces at least 1")
	}
	vmTemplates, err := readDir(*perVM)
	if err != nil {
		return err
	}
	nsTemplates, err := readDir(*perNamespace)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if existing, _ := os.ReadDir(*out); len(existing) > 0 {
		return fmt.Errorf("%s is not empty", *out)
	}
	var uids, names, owned []string
	for _, t := range vmTemplates {
		name, uid, err := identity(t)
		if err != nil {
			return err
		}
		if uid != "" {
			uids = append(uids, uid)
		}
		names = append(names, name)
	}
	for _, name := range names {
		unique := name == "" || strings.Contains(name, *vm)
		for _, uid := range uids {
			unique = unique || strings.Contains(name, uid)
		}
		if !unique {
			owned = append(owned, name)
		}
	}
	written := 0
	write := func(name, text string) error {
		written++
		return os.WriteFile(filepath.Join(*out, name), []byte(text), 0o644)
	}
	for n := 0; n < *namespaces; n++ {
		ns := fmt.Sprintf("%s-%d", *prefix, n)
		for _, t := range nsTemplates {
			if err := write(fmt.Sprintf("0-%s-%s", ns, t.file), strings.ReplaceAll(t.text, *namespace, ns)); err != nil {
				return err
			}
		}
	}
	for i := 0; i < *vms; i++ {
		ns := fmt.Sprintf("%s-%d", *prefix, i%*namespaces)
		name := fmt.Sprintf("vm-%05d", i)
		for _, t := range vmTemplates {
			text := strings.ReplaceAll(t.text, *vm, name)
			text = strings.ReplaceAll(text, *namespace, ns)
			for _, o := range owned {
				text = strings.ReplaceAll(text, `"`+o+`"`, fmt.Sprintf(`"%s-%05d"`, o, i))
			}
			for k, uid := range uids {
				text = strings.ReplaceAll(text, uid, fmt.Sprintf("%s%08x%04x", uid[:24], i, k))
			}
			if err := write(fmt.Sprintf("1-%05d-%s", i, t.file), text); err != nil {
				return err
			}
		}
	}
	fmt.Printf("vmgen: %d objects for %d VMs in %d namespaces (%d per VM, %d per namespace; %s renamed per VM) in %s\n",
		written, *vms, *namespaces, len(vmTemplates), len(nsTemplates), strings.Join(owned, ", "), *out)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vmgen:", err)
		os.Exit(1)
	}
}
