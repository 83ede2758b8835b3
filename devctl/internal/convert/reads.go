package convert

// Reads says which older forms of each kind the converter reads, for devctl convert --help. It
// lives beside the converter's tables (kinds.go), which hold the same facts about those APIs.
const Reads = `For TfJob it reads the 2017
mlkube.io/v1beta1 TfJob (snake_case replica_specs and its later camelCase form),
tensorflow.org/v1alpha1 and kubeflow.org/v1alpha1 TfJobs, and kubeflow.org TFJobs v1alpha2 to v1
(tfReplicaSpecs). For MXJob it reads fioravanzo.org/v1alpha1 and kubeflow.org/v1alpha1 MXJobs
(replicaSpecs with mxReplicaType, mxPort or PsRootPort) and kubeflow.org MXJobs v1alpha2 to v1
(mxReplicaSpecs). For PyTorchJob it reads kubeflow.org PyTorchJobs v1 (pytorchReplicaSpecs).
For JAXJob it reads kubeflow.org JAXJobs v1 (jaxReplicaSpecs).`
