// Package config holds nodeprobe's kustomize manifests (namespace, RBAC, the DaemonSet),
// embedded so that programs such as devctl install nodeprobe without a checkout at hand.
package config

import "embed"

// FS holds every file of the kustomization; a new directory must be added here too.
//
//go:embed kustomization.yaml namespace.yaml daemonset.yaml rbac
var FS embed.FS
