{{/*
The accelerators.preset configs: the shape nodeprobe publishes for the same layouts
(nodeprobe/internal/driver's buildConfig; the chart's tests hold each preset to what nodeprobe
finds on such a node, testdata/layouts/*.yaml). Each driver file is mounted on its own into the
image's own directories: libraries into both /usr/lib/x86_64-linux-gnu (Debian, Ubuntu) and
/usr/lib64 (RHEL and friends), where the image's dynamic loader looks with no env, and tools into
/usr/bin. No env is set: a pod's env would replace the image's own PATH and LD_LIBRARY_PATH.

Only files every driver release installs are named: a hostPath missing on the node is created
there by the container runtime as an empty directory. nodeprobe, or accelerators.config with
what `nodeprobe detect` prints, mounts the rest (libcudadebugger, libnvidia-gpucomp.so.<version>).
The host paths are the SONAME links, which the kubelet follows on the node.
*/}}
{{- define "mlkube.accelerators.files" -}}
accelerators:
  nvidia.com/gpu:
    volumes:
    {{- range $file := list "libnvidia-ml.so.1" "libcuda.so.1" "libnvidia-ptxjitcompiler.so.1" }}
    {{- range $dir := list "/usr/lib/x86_64-linux-gnu" "/usr/lib64" }}
    - name: nvidia-lib-{{ $file | replace "." "-" }}
      hostPath: {{ $.lib }}/{{ $file }}
      mountPath: {{ $dir }}/{{ $file }}
    {{- end }}
    {{- end }}
    - name: nvidia-bin-nvidia-smi
      hostPath: {{ .bin }}/nvidia-smi
      mountPath: /usr/bin/nvidia-smi
{{- end }}

{{/* GKE's driver installer puts the driver alone in its own directories. */}}
{{- define "mlkube.accelerators.gke" -}}
{{- include "mlkube.accelerators.files" (dict "lib" "/home/kubernetes/bin/nvidia/lib64" "bin" "/home/kubernetes/bin/nvidia/bin") }}
{{- end }}

{{/*
A driver installed on an Ubuntu host (NVIDIA's packages or its .run installer): its files are in
/usr/lib/x86_64-linux-gnu and /usr/bin, among every other library and tool of the system.
*/}}
{{- define "mlkube.accelerators.ubuntu-host-driver" -}}
{{- include "mlkube.accelerators.files" (dict "lib" "/usr/lib/x86_64-linux-gnu" "bin" "/usr/bin") }}
{{- end }}

{{/* AKS's GPU node pools run Ubuntu with the driver installed on the host, where the above looks. */}}
{{- define "mlkube.accelerators.aks" -}}
{{- include "mlkube.accelerators.ubuntu-host-driver" . }}
{{- end }}
