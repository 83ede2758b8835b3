{{/*
The accelerators.preset configs: the shape nodeprobe publishes for the same layouts
(nodeprobe/internal/driver's buildConfig; the chart's tests hold each preset to what nodeprobe
finds on such a node, testdata/layouts/*.yaml). Libraries go to /usr/local/nvidia/lib64 and tools
to /usr/local/nvidia/bin, where NVIDIA's CUDA images look, and both env vars replace the image's
own values, so PATH carries the usual directories.
*/}}

{{/*
GKE's driver installer puts the driver alone in its own directories, so each is mounted whole:
files not named here (graphics, video) come along.
*/}}
{{- define "mlkube.accelerators.gke" -}}
accelerators:
  nvidia.com/gpu:
    volumes:
    - name: nvidia-libraries
      hostPath: /home/kubernetes/bin/nvidia/lib64
      mountPath: /usr/local/nvidia/lib64
    - name: nvidia-binaries
      hostPath: /home/kubernetes/bin/nvidia/bin
      mountPath: /usr/local/nvidia/bin
    envVars:
    - name: LD_LIBRARY_PATH
      value: /usr/local/nvidia/lib64
    - name: PATH
      value: /usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
{{- end }}

{{/*
A driver installed on an Ubuntu host (NVIDIA's packages or its .run installer): its files are in
/usr/lib/x86_64-linux-gnu and /usr/bin, among every other library and tool of the system. Those
directories are never mounted whole (the node's C library would shadow the image's), so each
driver file is mounted on its own; a hostPath may name a file, and the host path is the SONAME
link, which the kubelet follows on the node. Only files every driver release installs are
named: a hostPath missing on the node is created there by the container runtime as an empty
directory. nodeprobe, or accelerators.config with what `nodeprobe detect` prints, mounts the
rest (libcudadebugger, libnvidia-gpucomp.so.<version>, ...).
*/}}
{{- define "mlkube.accelerators.ubuntu-host-driver" -}}
accelerators:
  nvidia.com/gpu:
    volumes:
    - name: nvidia-lib-libnvidia-ml-so-1
      hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
      mountPath: /usr/local/nvidia/lib64/libnvidia-ml.so.1
    - name: nvidia-lib-libcuda-so-1
      hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1
      mountPath: /usr/local/nvidia/lib64/libcuda.so.1
    - name: nvidia-lib-libnvidia-ptxjitcompiler-so-1
      hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1
      mountPath: /usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.1
    - name: nvidia-bin-nvidia-smi
      hostPath: /usr/bin/nvidia-smi
      mountPath: /usr/local/nvidia/bin/nvidia-smi
    envVars:
    - name: LD_LIBRARY_PATH
      value: /usr/local/nvidia/lib64
    - name: PATH
      value: /usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
{{- end }}

{{/* AKS's GPU node pools run Ubuntu with the driver installed on the host, where the above looks. */}}
{{- define "mlkube.accelerators.aks" -}}
{{- include "mlkube.accelerators.ubuntu-host-driver" . }}
{{- end }}
