package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// configMapServer answers what a plugin process asks of the Kubernetes API: the discovery of the
// core group and the list of module ConfigMaps in Velero's namespace at start, then what it writes
// on them once they serve (docs/modules.md §11: a server-side apply of the status annotation, core/v1
// Events), which it accepts and remembers. It is not an API server: only the ConfigMaps the
// scenarios need reach the plugin this way (the real API server runs in the live tests). Every
// other request is a 404 and is remembered.
type configMapServer struct {
	url    string
	items  []map[string]any
	mu     sync.Mutex
	other  []string
	writes []string
}

func startConfigMapServer(items []map[string]any) (*configMapServer, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &configMapServer{url: "http://" + listener.Addr().String(), items: items}
	go func() { _ = http.Serve(listener, s) }()
	return s, nil
}

func (s *configMapServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/velero/configmaps" {
		s.mu.Lock()
		items := s.items
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMapList",
			"metadata": map[string]any{"resourceVersion": "7"}, "items": items,
		})
		return
	}
	// The discovery of the core group, which the Kubernetes client reads before its first list.
	if r.Method == http.MethodGet && (r.URL.Path == "/api" || r.URL.Path == "/api/v1") {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api" {
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "APIVersions", "versions": []string{"v1"}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
			"resources": []any{
				map[string]any{"name": "configmaps", "singularName": "configmap", "namespaced": true,
					"kind": "ConfigMap", "verbs": []string{"get", "list", "watch", "patch"}},
				map[string]any{"name": "events", "singularName": "event", "namespaced": true,
					"kind": "Event", "verbs": []string{"create", "get", "list"}},
			}})
		return
	}
	// The state the plugin writes on the module ConfigMaps it served: accepted, as the API server
	// accepts it, and remembered.
	const configmaps = "/api/v1/namespaces/velero/configmaps/"
	if name, ok := strings.CutPrefix(r.URL.Path, configmaps); ok && r.Method == http.MethodPatch && s.serves(name) ||
		r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/velero/events" {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s.mu.Lock()
		s.writes = append(s.writes, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = w.Write(body)
		return
	}
	s.mu.Lock()
	s.other = append(s.other, r.Method+" "+r.URL.String())
	s.mu.Unlock()
	http.NotFound(w, r)
}

// serves says whether the ConfigMap `name` is among those served.
func (s *configMapServer) serves(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, item := range s.items {
		if meta, _ := item["metadata"].(map[string]any); meta["name"] == name {
			return true
		}
	}
	return false
}

// stateWrites lists what the plugin wrote on the served ConfigMaps (method and path).
func (s *configMapServer) stateWrites() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.writes...)
}

// set replaces the ConfigMaps served (an operator's apply or delete).
func (s *configMapServer) set(items []map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = items
}

// unexpected lists the requests the server could not answer.
func (s *configMapServer) unexpected() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.other...)
}

// kubeconfig writes a kubeconfig naming the server.
func (s *configMapServer) kubeconfig(path string) error {
	text := fmt.Sprintf("apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: test\n  cluster:\n    server: %s\n"+
		"users:\n- name: tester\n  user:\n    token: test-token\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: tester\n", s.url)
	return os.WriteFile(path, []byte(text), 0o600)
}

// shadowVersions numbers the shadow ConfigMaps this driver makes, as an API server numbers each change
// of an object: the plugin caches a ConfigMap's files by uid and resourceVersion, so two scenarios'
// different shadows of one module must not share both.
var shadowVersions atomic.Int64

// shadowConfigMap is the module ConfigMap of a shadow of module `module` (its component at
// `wasm`), whose action runs another case as `instead` says ("label:echo,..." in misbehave).
func shadowConfigMap(module, wasm, instead string) (map[string]any, error) {
	bytes, err := os.ReadFile(wasm)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(bytes)
	manifest := fmt.Sprintf("sha256 = \"%s\"\nversion = \"1.1.0\"\n[limits]\ntimeout = \"10s\"\n[settings]\ninstead = \"%s\"\n",
		hex.EncodeToString(sum[:]), instead)
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": module + "-candidate", "namespace": "velero", "uid": module + "-shadow-uid",
			"resourceVersion": strconv.FormatInt(5+shadowVersions.Add(1), 10),
			"labels":          map[string]any{"velero-wasm.io/module": module, "velero-wasm.io/shadow": "true"},
		},
		"binaryData": map[string]any{module + ".wasm": base64.StdEncoding.EncodeToString(bytes)},
		"data":       map[string]any{module + ".toml": manifest},
	}, nil
}

// addedConfigMap is the module ConfigMap of a serving module `module` (its component at `wasm`) with
// `settings`, as an operator applies one to add actions while Velero runs.
func addedConfigMap(module, wasm string, settings map[string]string) (map[string]any, error) {
	bytes, err := os.ReadFile(wasm)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(bytes)
	manifest := fmt.Sprintf("sha256 = \"%s\"\nversion = \"1.0.0\"\n[limits]\ntimeout = \"10s\"\n[settings]\n", hex.EncodeToString(sum[:]))
	for k, v := range settings {
		manifest += fmt.Sprintf("%s = %q\n", k, v)
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "velero-wasm-module-" + module, "namespace": "velero", "uid": module + "-uid",
			"resourceVersion": strconv.FormatInt(5+shadowVersions.Add(1), 10),
			"labels":          map[string]any{"velero-wasm.io/module": module},
		},
		"binaryData": map[string]any{module + ".wasm": base64.StdEncoding.EncodeToString(bytes)},
		"data":       map[string]any{module + ".toml": manifest},
	}, nil
}

// moduleDir writes the test components with manifests (a 10 s call limit) into dir, as an
// operator's VELERO_WASM_MODULES directory.
func moduleDir(dir, components string, names ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range names {
		bytes, err := os.ReadFile(components + "/" + name + ".wasm")
		if err != nil {
			return err
		}
		if err := os.WriteFile(dir+"/"+name+".wasm", bytes, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(bytes)
		manifest := "sha256 = \"" + hex.EncodeToString(sum[:]) + "\"\n[limits]\ntimeout = \"10s\"\n"
		if err := os.WriteFile(dir+"/"+strings.TrimSuffix(name, ".wasm")+".toml", []byte(manifest), 0o644); err != nil {
			return err
		}
	}
	return nil
}
