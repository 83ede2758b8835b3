package progress

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// The ConfigMap, one per namespace that runs jobs, holding the CAs trainers check the endpoint's
// certificate with. The kubelet keeps the pods' projected copy of it up to date, so a new CA
// reaches running jobs without a restart.
const (
	TrustConfigMap = "mlkube-progress-ca"
	TrustKey       = "ca.crt"
)

// Trust writes the namespaces' trust bundles.
type Trust struct {
	Certs *Certs
	// Client reads the bundles (the operator's cache holds them, and only them, of ConfigMaps)
	// and writes them.
	Client client.Client
	Now    func() time.Time
}

// Prepare makes namespace ns's bundle hold the CA of this operator, before its pods are created.
func (t *Trust) Prepare(ctx context.Context, ns string) error {
	ca, err := t.Certs.CA()
	if err != nil {
		return err
	}
	var cm corev1.ConfigMap
	err = t.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: TrustConfigMap}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TrustConfigMap,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "mlkube-operator"}},
			Data: map[string]string{TrustKey: string(ca)},
		}
		err = t.Client.Create(ctx, &cm)
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache lagged; the next job's pass checks it
		}
	case err != nil:
	case bytes.Contains([]byte(cm.Data[TrustKey]), ca):
		return nil
	default:
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[TrustKey] = string(Bundle(ca, []byte(cm.Data[TrustKey]), t.now()))
		err = t.Client.Update(ctx, &cm)
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s, the CA trainers check the progress endpoint with: %w", ns, TrustConfigMap, err)
	}
	return nil
}

func (t *Trust) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}
