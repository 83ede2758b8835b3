// Package config holds the operator's kustomize manifests (CRDs, RBAC, the Deployment), embedded
// so that programs such as devctl install the operator without a checkout at hand.
package config

import "embed"

// FS holds every file of the kustomize directories; a new directory must be added here too.
//
//go:embed admission crd default manager rbac
var FS embed.FS

// Default is the directory of FS whose kustomization lists everything the operator needs.
const Default = "default"
