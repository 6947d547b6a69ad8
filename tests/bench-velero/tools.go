//go:build tools

// Package tools pins the main package `make bench-velero` builds (tests/bench-velero/build.sh):
// toxiproxy's server, the latency injector between every client and kube-apiserver. The build tag
// keeps it out of every build.
package tools

import (
	_ "github.com/Shopify/toxiproxy/v2/cmd/server"
)
