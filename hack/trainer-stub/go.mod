// A build-only stand-in for Kubeflow Trainer v2's API, which Kueue's jobframework names for one
// constant (TrainJob's kind). The real module's generated OpenAPI code names core types that
// Kubernetes 0.37 no longer has, so it does not compile with the main module's libraries. mlkube
// never runs TrainJobs; this holds only what jobframework reads.
module github.com/kubeflow/trainer/v2

go 1.26.0

require k8s.io/apimachinery v0.37.0
