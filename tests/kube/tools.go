//go:build tools

// Package tools keeps the programs the live tests run in this module's requirements, so that
// `go mod tidy` keeps them and build.sh builds exactly the pinned versions.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
