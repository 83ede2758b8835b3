package config

import (
	"testing"

	"github.com/mlkube/mlkube/internal/rbaccheck"
)

// nodeprobe's RBAC is least privilege: no wildcards, no secrets, no escalate/bind/impersonate,
// and bound only to its own roles.
func TestRBACIsLeastPrivilege(t *testing.T) {
	for _, v := range rbaccheck.CheckDir(FS, "rbac", "ClusterRole mlkube-nodeprobe", "Role nodeprobe") {
		t.Error(v)
	}
}
