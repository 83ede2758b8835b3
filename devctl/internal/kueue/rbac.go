package kueue

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// ManagerRBACName names the ClusterRole and its binding that let Kueue's manager read mlkube's
// jobs.
const ManagerRBACName = "kueue-mlkube-jobs"

// ManagerRBAC is what Kueue's manager needs of the kinds it lists among its externalFrameworks
// and its chart does not grant: to read and watch them. Kueue's own webhooks and controllers
// look a pod's or a Workload's owner up by its kind; without this their watch of mlkube's kinds
// fails, and Kueue's pod webhook, which the apiserver calls for every pod an mlkube job
// creates, waits for that watch until the apiserver gives up on it: no replica is created.
func ManagerRBAC(kinds []*v1beta1.Kind) ([]*unstructured.Unstructured, error) {
	var plurals []string
	for _, k := range kinds {
		plurals = append(plurals, k.Plural)
	}
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: ManagerRBACName},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{v1beta1.GroupVersion.Group}, Resources: plurals, Verbs: []string{"get", "list", "watch"},
		}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ManagerRBACName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ManagerRBACName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: Namespace, Name: ServiceAccount}},
	}
	var out []*unstructured.Unstructured
	for _, o := range []runtime.Object{role, binding} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}
