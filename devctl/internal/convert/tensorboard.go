package convert

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// oldTensorboard is the TensorBoard section of the list form, as read.
type oldTensorboard struct {
	logDir, image, serviceType string
	volumes                    []corev1.Volume
	volumeMounts               []corev1.VolumeMount
	podLabels, podAnnotations  map[string]string
	dropped                    []string
}

func (t *oldTensorboard) spec() *v1beta1.TensorboardSpec {
	return &v1beta1.TensorboardSpec{
		LogDir:         t.logDir,
		Image:          t.image,
		ServiceType:    corev1.ServiceType(t.serviceType),
		Volumes:        t.volumes,
		VolumeMounts:   t.volumeMounts,
		PodLabels:      t.podLabels,
		PodAnnotations: t.podAnnotations,
	}
}

// listTensorboard reads the TensorBoard section of the list form: logDir, volumes,
// volumeMounts and serviceType, in either spelling, and what today's adds (podLabels,
// podAnnotations).
func listTensorboard(spec *fields) (*oldTensorboard, error) {
	tb, ok, err := spec.object("tensorboard", "tensorBoard", "tensor_board")
	if err != nil || !ok {
		return nil, err
	}
	var t oldTensorboard
	logDir, _, ok, err := tb.str("logDir", "log_dir")
	if err != nil {
		return nil, err
	}
	if !ok || logDir == "" {
		return nil, fmt.Errorf("%s.logDir is missing: TensorBoard needs the directory of the job's event files", tb.path)
	}
	t.logDir = logDir
	if t.image, _, _, err = tb.str("image"); err != nil {
		return nil, err
	}
	st, stPath, ok, err := tb.str("serviceType", "service_type")
	if err != nil {
		return nil, err
	}
	if ok && st != "" {
		switch corev1.ServiceType(st) {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			t.serviceType = st
		default:
			return nil, fmt.Errorf("%s: %q is not one of ClusterIP, NodePort, LoadBalancer", stPath, st)
		}
	}
	for _, part := range []struct {
		keys []string
		into any
	}{
		{[]string{"volumes"}, &t.volumes},
		{[]string{"volumeMounts", "volume_mounts"}, &t.volumeMounts},
		{[]string{"podLabels"}, &t.podLabels},
		{[]string{"podAnnotations"}, &t.podAnnotations},
	} {
		if v, path, ok, err := tb.raw(part.keys...); err != nil {
			return nil, err
		} else if ok {
			dropped, err := decode(path, v, part.into)
			if err != nil {
				return nil, err
			}
			t.dropped = append(t.dropped, dropped...)
		}
	}
	t.dropped = append(t.dropped, tb.unread()...)
	return &t, nil
}
