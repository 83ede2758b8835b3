package convert

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// defaultPS gives a PS group without a template the old operators' parameter server:
// TensorFlow's standard server in spec.tfImage, else DefaultPSImage. Other groups need one.
func defaultPS(r *listRead, path string, g *replicaGroup) bool {
	if g.typ != string(v1beta1.TfReplicaPS) {
		return false
	}
	image := DefaultPSImage
	if r.image != "" {
		image = r.image
		if len(r.usedBy) == 0 {
			r.usedBy = append(r.usedBy, "the parameter servers of the PS group without a template")
		}
	}
	g.template = defaultPSTemplate(image)
	if g.policy == "" {
		g.policy = v1beta1.RestartPolicyOnFailure // the old default PS pod's
	}
	r.w.add("%s (PS) has no template: it runs TensorFlow's standard server, as the old operator did "+
		"(container tensorflow, image %s, `python -c` on a script that serves this replica's task from TF_CONFIG, restartPolicy %s); "+
		"a cluster that cannot pull that image, such as devctl's offline kind cluster, needs a template of the group's own",
		path, image, g.policy)
	return true
}

// DefaultPSImage runs the parameter servers of a PS group that has no template, as the old
// operators did with their tfImage. It is TensorFlow 1.x on purpose: the jobs that relied on a
// default PS are TensorFlow 1 programs (between-graph replication onto /job:ps devices), whose
// parameter servers are TensorFlow's standard gRPC server, tf.train.Server; TensorFlow 2 moved
// it to tf.distribute.Server and dropped the graph-mode APIs those workers use. 1.15.5 is the
// last 1.x release, so it speaks the protocol of any 1.x worker with every 1.x fix in, and it
// is the CPU image, which is all a parameter server needs.
const DefaultPSImage = "tensorflow/tensorflow:1.15.5"

// psServerScript is the parameter server of a PS group without a template: TensorFlow's
// standard gRPC server for this replica's task in the cluster TF_CONFIG describes (the old
// operators ran grpc_tensorflow_server.py, which did the same from flags). It serves until the
// operator stops it. The fallback keeps it working when spec.tfImage names a TensorFlow 2 image.
const psServerScript = `import json, os
import tensorflow as tf

tf_config = json.loads(os.environ["TF_CONFIG"])
cluster = tf.train.ClusterSpec(tf_config["cluster"])
task = tf_config["task"]
Server = getattr(tf.train, "Server", None) or tf.distribute.Server
Server(cluster, job_name=task["type"], task_index=task["index"]).join()
`

// defaultPSTemplate is the pod of a parameter server that runs the standard server in image.
func defaultPSTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:    v1beta1.TfContainerName,
				Image:   image,
				Command: []string{"python", "-c", psServerScript},
			}},
		},
	}
}
