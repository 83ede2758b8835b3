package tfjob_test

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// richTemplate sets fields from every corner of a pod template: metadata, init and sidecar
// containers, probes, resources, security, scheduling, volumes of several kinds (an ephemeral
// volume's claim template has metadata of its own), DNS and more.
const richTemplate = `{
  "metadata": {"labels": {"team": "ml", "sidecar.istio.io/inject": "true"},
               "annotations": {"prometheus.io/scrape": "true", "note": "kept"}},
  "spec": {
    "initContainers": [{"name": "fetch", "image": "busybox:1", "command": ["sh", "-c", "true"]},
                       {"name": "proxy", "image": "envoy:1", "restartPolicy": "Always"}],
    "containers": [{
      "name": "tensorflow", "image": "mlkube/trainer:test", "args": ["--steps", "10"],
      "workingDir": "/w", "imagePullPolicy": "IfNotPresent",
      "env": [{"name": "A", "value": "1"}, {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
      "envFrom": [{"configMapRef": {"name": "cfg", "optional": true}}],
      "ports": [{"name": "metrics", "containerPort": 9000, "protocol": "TCP"}],
      "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}},
      "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true}, {"name": "scratch", "mountPath": "/scratch"}],
      "livenessProbe": {"httpGet": {"path": "/healthz", "port": 9000, "scheme": "HTTP"}, "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
      "readinessProbe": {"tcpSocket": {"port": 2222}, "initialDelaySeconds": 2, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
      "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}},
      "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "allowPrivilegeEscalation": false,
                          "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
      "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "FallbackToLogsOnError",
      "stdin": false, "tty": false
    }],
    "volumes": [
      {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": true}},
      {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
        "metadata": {"labels": {"kind": "scratch"}, "annotations": {"a": "b"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
      {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
      {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420, "items": [{"key": "k", "path": "p"}]}}
    ],
    "nodeSelector": {"gpu": "a100"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
      {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}},
      "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"team": "ml"}}, "topologyKey": "kubernetes.io/hostname"}}]}},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
      "labelSelector": {"matchLabels": {"team": "ml"}}}],
    "priorityClassName": "high", "schedulerName": "volcano", "serviceAccountName": "trainer",
    "automountServiceAccountToken": false, "terminationGracePeriodSeconds": 30, "activeDeadlineSeconds": 3600,
    "hostIPC": false, "shareProcessNamespace": true, "enableServiceLinks": false,
    "securityContext": {"fsGroup": 2000, "runAsGroup": 3000, "supplementalGroups": [4000],
      "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
    "imagePullSecrets": [{"name": "regcred"}],
    "dnsPolicy": "ClusterFirst", "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": ["a.local"], "options": [{"name": "ndots", "value": "2"}]},
    "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["storage"]}],
    "runtimeClassName": "nvidia", "preemptionPolicy": "PreemptLowerPriority",
    "overhead": {"cpu": "100m"}, "readinessGates": [{"conditionType": "example.com/ready"}],
    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}],
    "restartPolicy": "Never"
  }
}`

// Every field a user writes in a TfJob comes back from the apiserver as written: nothing is
// pruned by the CRD's schema, and nothing is defaulted over (every default's field is set).
func TestAJobWithEveryFieldRoundTripsThroughTheAPIServer(t *testing.T) {
	ns := namespace(t)
	job := standardJob(ns, "full")
	for i := range job.Spec.ReplicaSpecs {
		rs := &job.Spec.ReplicaSpecs[i]
		must(t, json.Unmarshal([]byte(richTemplate), &rs.Template))
		rs.TfPort, rs.RestartPolicy = int32(3000+i), v1beta1.RestartPolicyOnFailure
	}
	job.Spec.Tensorboard = &v1beta1.TensorboardSpec{
		LogDir: "/logs", Image: "tensorboard:1", ServiceType: "NodePort",
		Volumes:        job.Spec.ReplicaSpecs[0].Template.Spec.Volumes,
		VolumeMounts:   job.Spec.ReplicaSpecs[0].Template.Spec.Containers[0].VolumeMounts,
		PodLabels:      map[string]string{"team": "ml"},
		PodAnnotations: map[string]string{"prometheus.io/scrape": "true"},
	}
	job.Spec.RunPolicy = v1beta1.RunPolicy{CleanPodPolicy: v1beta1.CleanPodPolicyAll, BackoffLimit: ptr.To[int32](5),
		ActiveDeadlineSeconds: ptr.To[int64](600), TTLSecondsAfterFinished: ptr.To[int32](60)}
	want := job.Spec.DeepCopy()

	must(t, k8s.Create(context.Background(), job))
	got := getJob(t, ns, "full").Spec
	if !equality.Semantic.DeepEqual(*want, got) {
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		t.Errorf("the apiserver changed the job's spec:\nsent %s\ngot  %s", wj, gj)
	}
}
