// Command kubeobj is the small Kubernetes client `make e2e` (tests/e2e/run.sh) uses instead of
// kubectl, which a fresh machine lacks: it creates objects from JSON or YAML files, their status
// included, prints objects as JSON and waits for CRDs, against the cluster KUBECONFIG names.
//
//	kubeobj apply FILE...            create each object (or replace it when it exists), then its status
//	kubeobj get RESOURCE NS NAME     print the object as JSON (RESOURCE as kubectl takes it: pods,
//	                                 virtualmachines.kubevirt.io, ...; NS "" for cluster-scoped)
//	kubeobj list RESOURCE NS         print the names of the objects, one a line
//	kubeobj wait-crds GROUP...       wait until every CRD of the groups is established and served
//
// Objects are taken as they are, less what the API server assigns (uid, resourceVersion,
// creationTimestamp, generation, managedFields), so that fixture files load unchanged.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// client is the dynamic client with a discovery-backed mapper from kinds and resource names to
// the API's resources.
type client struct {
	dyn    dynamic.Interface
	disc   discovery.CachedDiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newClient() (*client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the cluster configuration (KUBECONFIG): %w", err)
	}
	config.QPS, config.Burst = 100, 200
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	d, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, err
	}
	disc := memory.NewMemCacheClient(d)
	return &client{dyn: dyn, disc: disc, mapper: restmapper.NewDeferredDiscoveryRESTMapper(disc)}, nil
}

// mappingFor maps an object's kind to its resource, once more after a fresh discovery when a CRD
// was created since the last one.
func (c *client) mappingFor(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// resource maps "pods" or "virtualmachines.kubevirt.io" to its resource and whether it is namespaced.
func (c *client) resource(name string) (schema.GroupVersionResource, bool, error) {
	partial := schema.ParseGroupResource(name).WithVersion("")
	gvr, err := c.mapper.ResourceFor(partial)
	if err != nil {
		c.mapper.Reset()
		if gvr, err = c.mapper.ResourceFor(partial); err != nil {
			return gvr, false, fmt.Errorf("no resource %q in the API: %w", name, err)
		}
	}
	gvk, err := c.mapper.KindFor(gvr)
	if err != nil {
		return gvr, false, err
	}
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return gvr, false, err
	}
	return gvr, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (c *client) handle(m *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(namespace)
	}
	return c.dyn.Resource(m.Resource)
}

// apply creates the object, or replaces the one of its name, then writes its status through the
// status subresource when it has one.
func (c *client) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	for _, field := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", field)
	}
	what := fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
	m, err := c.mappingFor(obj.GroupVersionKind())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	h := c.handle(m, obj.GetNamespace())
	status, hasStatus := obj.Object["status"]
	created, err := h.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var current *unstructured.Unstructured
		if current, err = h.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
			obj.SetResourceVersion(current.GetResourceVersion())
			created, err = h.Update(ctx, obj, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !hasStatus {
		return nil
	}
	created.Object["status"] = status
	if _, err := h.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: status: %w", what, err)
	}
	return nil
}

// objects reads every object of a JSON or YAML file (several YAML documents, or a List).
func objects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		body, err := utilyaml.ToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if string(body) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(body); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			continue
		}
		out = append(out, obj)
	}
	return out, nil
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: kubeobj apply FILE... | get RESOURCE NS NAME | list RESOURCE NS | delete RESOURCE NS NAME | events NS NAME | wait-crds GROUP...")
	}
	c, err := newClient()
	if err != nil {
		return err
	}
	switch args[0] {
	case "apply":
		for _, path := range args[1:] {
			objs, err := objects(path)
			if err != nil {
				return err
			}
			for _, obj := range objs {
				if err := c.apply(ctx, obj); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
		}
		return nil
	case "get", "list":
		if (args[0] == "get" && len(args) != 4) || (args[0] == "list" && len(args) != 3) {
			return fmt.Errorf("usage: kubeobj get RESOURCE NS NAME | list RESOURCE NS")
		}
		h, err := c.named(args[1], args[2])
		if err != nil {
			return err
		}
		if args[0] == "list" {
			list, err := h.List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list %s in %q: %w", args[1], args[2], err)
			}
			for _, item := range list.Items {
				fmt.Println(item.GetName())
			}
			return nil
		}
		obj, err := h.Get(ctx, args[3], metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get %s %s/%s: %w", args[1], args[2], args[3], err)
		}
		body, err := json.MarshalIndent(obj.Object, "", "  ")
		if err != nil {
			return err
		}
		fmt.Println(string(body))
		return nil
	case "delete":
		if len(args) != 4 {
			return fmt.Errorf("usage: kubeobj delete RESOURCE NS NAME")
		}
		h, err := c.named(args[1], args[2])
		if err != nil {
			return err
		}
		if err := h.Delete(ctx, args[3], metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete %s %s/%s: %w", args[1], args[2], args[3], err)
		}
		return nil
	case "events":
		// What `kubectl describe` shows of an object's events: each core/v1 Event whose
		// involvedObject is NAME in NS, one line each, "TYPE REASON MESSAGE".
		if len(args) != 3 {
			return fmt.Errorf("usage: kubeobj events NS NAME")
		}
		events := schema.GroupVersionResource{Version: "v1", Resource: "events"}
		list, err := c.dyn.Resource(events).Namespace(args[1]).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + args[2],
		})
		if err != nil {
			return fmt.Errorf("list events of %s/%s: %w", args[1], args[2], err)
		}
		for _, e := range list.Items {
			kind, _, _ := unstructured.NestedString(e.Object, "type")
			reason, _, _ := unstructured.NestedString(e.Object, "reason")
			message, _, _ := unstructured.NestedString(e.Object, "message")
			fmt.Printf("%s %s %s\n", kind, reason, message)
		}
		return nil
	case "wait-crds":
		return c.waitCRDs(ctx, args[1:])
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// named is the dynamic client of a resource named as on kubectl's command line, in namespace
// (ignored for a cluster-scoped resource).
func (c *client) named(resource, namespace string) (dynamic.ResourceInterface, error) {
	gvr, namespaced, err := c.resource(resource)
	if err != nil {
		return nil, err
	}
	if namespaced {
		return c.dyn.Resource(gvr).Namespace(namespace), nil
	}
	return c.dyn.Resource(gvr), nil
}

// waitCRDs waits (up to a minute) until every CRD of the groups is Established and its group is
// served by discovery.
func (c *client) waitCRDs(ctx context.Context, groups []string) error {
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	deadline := time.Now().Add(time.Minute)
	for {
		pending := []string{}
		list, err := c.dyn.Resource(crds).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing CRDs: %w", err)
		}
		seen := map[string]bool{}
		for _, crd := range list.Items {
			group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
			seen[group] = true
			established := false
			conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conditions {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					established = true
				}
			}
			if !established && contains(groups, group) {
				pending = append(pending, crd.GetName())
			}
		}
		for _, g := range groups {
			if !seen[g] {
				pending = append(pending, "(no CRD of group "+g+")")
			}
		}
		if len(pending) == 0 {
			c.mapper.Reset()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRDs not established after a minute: %s", strings.Join(pending, ", "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kubeobj:", err)
		os.Exit(1)
	}
}
