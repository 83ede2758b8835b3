package replicajob

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// memory is everything the engine remembers about one job between reconciles; the rest it reads
// afresh from the job and the cache each time. It belongs to one job, by UID: a job deleted and
// created again under its name is another job, and inherits none of it (not the backoff of its
// predecessor's refused pods, nor the objects it created).
type memory struct {
	mu sync.Mutex // create's goroutines add to created at once; the rest is one reconcile's
	// lastWrite is when the job's status was last written (statuswrite.go).
	lastWrite time.Time
	// created holds the pods and services created that the cache has not shown yet (unseen.go).
	created map[string]time.Time
	// refusal is the backoff of the job's refused creates; zero when none is refused (refusals.go).
	refusal backoff
	// resolved is the job's checked cluster, as of one generation of its spec (cluster.go).
	resolved *resolved
	// mounts is what the job's FailedMount events said when last read (mounts.go).
	mounts mountChecks
	// unreadable is what was said of the job while it cannot be decoded whole, and counted the
	// labels it is counted under in the mlkube_jobs_unreadable gauge (unreadable.go).
	unreadable string
	counted    []string
	// progressUnavailable is true once the job was told that its namespace could not be readied
	// for progress reports (progress.go).
	progressUnavailable bool
	// failureSeen is when a permanent failure of the job was first seen (firstfailure.go).
	failureSeen time.Time
}

// memories holds the memory of every job a reconciler has seen, by UID, and which UID holds
// each name now (a reconcile request names the job, and a deleted job has no UID left to read).
type memories struct {
	mu     sync.Mutex
	byUID  map[types.UID]*memory
	byName map[types.NamespacedName]types.UID
}

// of is the memory of job. A name that now belongs to a new UID drops the old job's memory.
func (m *memories) of(job metav1.Object) *memory {
	key := types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}
	uid := job.GetUID()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byUID == nil {
		m.byUID, m.byName = map[types.UID]*memory{}, map[types.NamespacedName]types.UID{}
	}
	if old, ok := m.byName[key]; ok && old != uid {
		m.dropLocked(old)
	}
	m.byName[key] = uid
	mem := m.byUID[uid]
	if mem == nil {
		mem = &memory{}
		m.byUID[uid] = mem
	}
	return mem
}

// forget drops what is remembered of the job that had this name, once it is deleted.
func (m *memories) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if uid, ok := m.byName[key]; ok {
		delete(m.byName, key)
		m.dropLocked(uid)
	}
}

func (m *memories) dropLocked(uid types.UID) {
	if mem := m.byUID[uid]; mem != nil {
		mem.readable()
	}
	delete(m.byUID, uid)
}

// len is how many jobs are remembered.
func (m *memories) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byUID)
}
