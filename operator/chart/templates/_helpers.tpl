{{/*
Labels every object of the chart carries besides its own: which release and chart made it.
The objects' names stay those of the kustomize manifests (mlkube-operator, nodeprobe, ...), not
prefixed with the release: nodeprobe, devctl and the docs find them by those names, so one
release runs per cluster (or, in namespaced mode, per operator namespace with nodeprobe in one
of them only).
*/}}
{{- define "mlkube.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* image: repository:tag of an image value, the tag defaulting to the chart's appVersion. */}}
{{- define "mlkube.image" -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .root.Chart.AppVersion) }}
{{- end }}

{{/* The ConfigMap the operator reads its accelerator config from, and nodeprobe writes. */}}
{{- define "mlkube.acceleratorConfigMap" -}}mlkube-accelerators{{- end }}

{{/*
leaderElect: "true" when the operator elects a leader: as leaderElection says, and always with
more than one replica (two operators acting at once would race each other's decisions).
*/}}
{{- define "mlkube.leaderElect" -}}
{{- if or .Values.operator.leaderElection (gt (int .Values.operator.replicas) 1) }}true{{ end }}
{{- end }}

{{/*
Checks of values that the schema cannot express. The Deployment's template, always rendered,
includes it: a fail in any template fails the whole install.
*/}}
{{- define "mlkube.check" -}}
{{- if and .Values.nodeprobe.enabled (eq .Values.nodeprobe.namespace .Release.Namespace) }}
{{- fail (printf "nodeprobe.namespace must not be the release's namespace %q: nodeprobe's pod needs the privileged Pod Security level, the operator's namespace enforces restricted" .Release.Namespace) }}
{{- end }}
{{- if and .Values.accelerators.preset .Values.accelerators.config }}
{{- fail "set accelerators.preset or accelerators.config, not both" }}
{{- end }}
{{- if and .Values.nodeprobe.enabled (or .Values.accelerators.preset .Values.accelerators.config) }}
{{- fail "accelerators.preset and accelerators.config are for clusters without nodeprobe, which would replace them with what it finds: set nodeprobe.enabled=false, or leave them empty" }}
{{- end }}
{{- with .Values.accelerators.config }}
{{- /* The operator checks the config strictly and will not start with a bad one: catch what
       can be caught here, YAML that does not parse or is not an accelerator config at all. */}}
{{- $parsed := fromYaml . }}
{{- if hasKey $parsed "Error" }}
{{- fail (printf "accelerators.config is not YAML: %s" $parsed.Error) }}
{{- end }}
{{- if not (hasKey $parsed "accelerators") }}
{{- fail "accelerators.config has no accelerators: key (docs/operator.md#file-format)" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The kinds of job the chart installs, from its CRDs (crds/, copied from the operator's generated
CRDs): "TfJobs, MXJobs, PyTorchJobs". No kind is named by hand. */}}
{{- define "mlkube.kinds" -}}
{{- $kinds := list }}
{{- range $path, $_ := .Files.Glob "crds/*.yaml" }}
{{- $crd := $.Files.Get $path | fromYaml }}
{{- $kinds = append $kinds (printf "%ss" $crd.spec.names.kind) }}
{{- end }}
{{- join ", " $kinds }}
{{- end }}
