package convert

import (
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
// podAnnotations), as written: the CRD says what they take. It records in o where the manifest
// had them.
func listTensorboard(spec *fields, o origins) (*oldTensorboard, error) {
	tb, ok, err := spec.object("tensorboard", "tensorBoard", "tensor_board")
	if err != nil || !ok {
		return nil, err
	}
	var t oldTensorboard
	o.set("spec.tensorboard", tb.path, false)
	for _, part := range []struct {
		keys []string
		into *string
	}{
		{[]string{"logDir", "log_dir"}, &t.logDir},
		{[]string{"image"}, &t.image},
		{[]string{"serviceType", "service_type"}, &t.serviceType},
	} {
		var path string
		if *part.into, path, _, err = tb.str(part.keys...); err != nil {
			return nil, err
		}
		o.set("spec.tensorboard."+part.keys[0], path, false)
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
			o.set("spec.tensorboard."+part.keys[0], path, true)
			t.dropped = append(t.dropped, dropped...)
		}
	}
	t.dropped = append(t.dropped, tb.unread()...)
	return &t, nil
}
