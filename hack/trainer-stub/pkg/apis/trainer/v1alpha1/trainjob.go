// Package v1alpha1 holds the names Kueue's jobframework reads from Kubeflow Trainer's API.
package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// SchemeGroupVersion is Trainer's API group and version.
var SchemeGroupVersion = schema.GroupVersion{Group: "trainer.kubeflow.org", Version: "v1alpha1"}

// TrainJobKind is Trainer's job kind.
const TrainJobKind = "TrainJob"
