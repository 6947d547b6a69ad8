//go:build tools

// Package tools pins the main packages `make e2e` builds (tests/e2e/build.sh): the velero binary
// (server and CLI in one) and the AWS object-store plugin. The build tag keeps it out of every build.
package tools

import (
	_ "github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws"
	_ "github.com/vmware-tanzu/velero/cmd/velero"
)
