package kube

import (
	"context"
	"encoding/json"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Served asks the apiserver which of kinds it serves. It is the first request the dashboard
// makes, so it is also where an unreachable cluster, bad credentials or missing CRDs show up,
// each as an error that says what to do.
func Served(ctx context.Context, cfg *rest.Config, kinds []*v1beta1.Kind) ([]*v1beta1.Kind, error) {
	c := rest.CopyConfig(cfg)
	c.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return nil, err
	}
	body, err := dc.RESTClient().Get().AbsPath("/apis", v1beta1.GroupVersion.Group, v1beta1.GroupVersion.Version).DoRaw(ctx)
	if apierrors.IsNotFound(err) {
		return nil, notInstalled(cfg.Host)
	}
	if err != nil {
		return nil, Explain(err, Access{Verbs: []string{"get"}, Resource: "the API discovery document /apis/" + v1beta1.GroupVersion.String()}, cfg.Host)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	var served []*v1beta1.Kind
	for _, k := range kinds {
		for _, r := range list.APIResources {
			if r.Name == k.Plural {
				served = append(served, k)
				break
			}
		}
	}
	if len(served) == 0 {
		return nil, notInstalled(cfg.Host)
	}
	return served, nil
}
