// Package admitted says which jobs the apiserver has already checked against the CRD the
// operator carries, so that the operator checks in process (operator/crdvalidate) only the jobs
// it may not have: those stored before the cluster's CRD took its present form, and every job
// while that CRD is not the operator's own.
//
// The in-process check exists for jobs stored before a rule existed: an apiserver checks an
// object only when it is written. For a job created after the CRD last changed, the apiserver's
// check at its create was the same check, and every later update was checked by the same rules
// (ratcheting lets through only what is unchanged since, and so was checked at create). Doing it
// again cost the operator half of what it allocated for a burst of new jobs and a third of its
// CPU (docs/performance.md).
//
// When the CRD last changed is the latest time in its managedFields: the apiserver's clock, as
// the job's creationTimestamp is, each to the second. A job counts as checked only when it was
// created Margin after that, which covers the rounding, the apiserver's own delay in serving a
// changed CRD, and clocks of several apiservers a little apart. Nobody but whoever may write
// CRDs moves that time; a tenant's job cannot claim to be checked.
package admitted

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/config"
)

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Margin is how long after its CRD last changed a job must have been created for the apiserver's
// check at its create to count.
const Margin = 5 * time.Second

// Run follows the metadata of the cluster's CRDs until ctx ends. Until their first list is in, and
// without the RBAC to list them, no job counts as checked: every job is checked in process, as
// before, and nothing waits for this. It runs beside the operator's cache rather than in it,
// so that a missing permission cannot hold up the cache's start.
func (c *Checker) Run(ctx context.Context, cfg *rest.Config) error {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gvr := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	informer := metadatainformer.NewFilteredMetadataInformer(mc, gvr, "", 0, cache.Indexers{}, nil).Informer()
	if err := informer.SetTransform(trim); err != nil {
		return err
	}
	if err := c.Watch(informer); err != nil {
		return err
	}
	informer.Run(ctx.Done())
	return nil
}

// trim keeps of a CRD's metadata what the Checker reads: the times of its managedFields, not
// the fields (a CRD's run to hundreds of kilobytes).
func trim(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		for i := range m.ManagedFields {
			m.ManagedFields[i].FieldsV1 = nil
		}
		m.Annotations, m.Labels = nil, nil
	}
	return obj, nil
}

// A Checker answers for every kind of v1beta1.Kinds, from the CRDs' metadata in a cache (CRDs)
// and, once for each generation of a CRD, the whole CRD read past it.
type Checker struct {
	// Reader reads a whole CRD, when its generation changes, to compare it with the operator's.
	Reader client.Reader

	mu   sync.Mutex
	crds map[string]*state // by CRD name, ours only

	// comparing is held while a CRD is read and compared, so that a burst of jobs reads it once.
	comparing sync.Mutex
	ours      map[*v1beta1.Kind]*apiextensionsv1.CustomResourceDefinition
}

// state is one CRD as the Checker last saw it.
type state struct {
	generation int64
	changed    time.Time // the latest managedFields time
	// same says the CRD's schema is the operator's own, for generation sameFor; compared only
	// when a job asks, never for a generation nobody asked about.
	same    bool
	sameFor int64
}

// An Informer tells of changes to what it watches: the cache's informer of CRDs().
type Informer interface {
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
}

// Watch follows the CRDs' metadata through informer.
func (c *Checker) Watch(informer Informer) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.saw,
		UpdateFunc: func(_, obj any) { c.saw(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, ok := obj.(metav1.Object); ok {
				c.mu.Lock()
				delete(c.crds, m.GetName())
				c.mu.Unlock()
			}
		},
	})
	return err
}

func (c *Checker) saw(obj any) {
	m, ok := obj.(metav1.Object)
	if !ok || !ours(m.GetName()) {
		return
	}
	changed := m.GetCreationTimestamp().Time
	for _, f := range m.GetManagedFields() {
		if f.Time != nil && f.Time.After(changed) {
			changed = f.Time.Time
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crds == nil {
		c.crds = map[string]*state{}
	}
	s := c.crds[m.GetName()]
	if s == nil {
		s = &state{}
		c.crds[m.GetName()] = s
	}
	s.generation, s.changed = m.GetGeneration(), changed
}

// ours says crd is the name of the CRD of one of the operator's kinds.
func ours(crd string) bool {
	for _, k := range v1beta1.Kinds {
		if k.CRD() == crd {
			return true
		}
	}
	return false
}

// Checked says the apiserver checked job, when it stored it, against the very CRD the operator
// carries: the cluster's CRD of its kind has the operator's schema, and has not changed since
// Margin before the job was created. False when it cannot tell: the in-process check then runs.
func (c *Checker) Checked(ctx context.Context, job v1beta1.Job) bool {
	if c == nil {
		return false
	}
	k := v1beta1.KindOf(job)
	if k == nil {
		return false
	}
	c.mu.Lock()
	s := c.crds[k.CRD()]
	var st state
	if s != nil {
		st = *s
	}
	c.mu.Unlock()
	if s == nil || !job.GetCreationTimestamp().Time.After(st.changed.Add(Margin)) {
		return false
	}
	if st.sameFor == st.generation {
		return st.same
	}
	c.comparing.Lock()
	defer c.comparing.Unlock()
	c.mu.Lock()
	st = *s
	c.mu.Unlock()
	if st.sameFor == st.generation { // another job's check compared it meanwhile
		return st.same
	}
	same, err := c.same(ctx, k, st.generation)
	if err != nil {
		return false
	}
	c.mu.Lock()
	if s.generation == st.generation {
		s.same, s.sameFor = same, st.generation
	}
	c.mu.Unlock()
	return same
}

// same reads kind k's CRD from the cluster and says whether its schemas are the operator's, for
// generation gen; an error when the cluster's is of another generation by now. The caller holds
// comparing.
func (c *Checker) same(ctx context.Context, k *v1beta1.Kind, gen int64) (bool, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: k.CRD()}, &crd); err != nil {
		return false, err
	}
	if crd.Generation != gen {
		return false, fmt.Errorf("the %s CRD changed while it was read", k.Name)
	}
	ours := c.ours[k]
	if ours == nil {
		var err error
		if ours, err = config.CRD(k); err != nil {
			return false, err
		}
		if c.ours == nil {
			c.ours = map[*v1beta1.Kind]*apiextensionsv1.CustomResourceDefinition{}
		}
		c.ours[k] = ours
	}
	return SameSchemas(ours, &crd), nil
}

// SameSchemas says a and b check objects alike: the same versions, each with the same schema.
func SameSchemas(a, b *apiextensionsv1.CustomResourceDefinition) bool {
	if len(a.Spec.Versions) != len(b.Spec.Versions) || a.Spec.PreserveUnknownFields != b.Spec.PreserveUnknownFields {
		return false
	}
	for i, v := range a.Spec.Versions {
		w := b.Spec.Versions[i]
		if v.Name != w.Name || !equality.Semantic.DeepEqual(v.Schema, w.Schema) {
			return false
		}
	}
	return true
}
