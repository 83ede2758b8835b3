package replicajob

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// createdTTL is how long a created pod or service is taken to exist while the cache does not show
// it yet. Its watch event takes milliseconds, seconds on a busy apiserver; after createdTTL the
// engine trusts the cache again (someone may have deleted the object before it was seen).
const createdTTL = 30 * time.Second

// unseen remembers, per job, the pods and services this process created that its cache has not
// shown yet. Without it every reconcile in that short window (the job's own status write brings
// one) would create them again, only to be answered 409 AlreadyExists: measured at up to nine
// wasted requests per job when jobs are few and reconciles quick.
type unseen struct {
	mu      sync.Mutex
	uid     types.UID            // the job's; a job created again under the same name starts afresh
	created map[string]time.Time // "pod/<name>" or "service/<name>" -> when it was created
}

// unseenOf gives the record of one job, emptied when the name now belongs to another job.
func (e *Reconciler) unseenOf(key types.NamespacedName, uid types.UID) *unseen {
	v, _ := e.unseen.LoadOrStore(key, &unseen{uid: uid, created: map[string]time.Time{}})
	u := v.(*unseen)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.uid != uid {
		u.uid, u.created = uid, map[string]time.Time{}
	}
	return u
}

// seen forgets an object the cache shows.
func (u *unseen) seen(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.created, key)
}

// add records an object just created.
func (u *unseen) add(key string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.created[key] = now
}

// pending says how much longer an object not in the cache is taken to exist; 0 means it is not
// (never created here, or created longer than createdTTL ago).
func (u *unseen) pending(key string, now time.Time) time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	at, ok := u.created[key]
	if !ok {
		return 0
	}
	left := createdTTL - now.Sub(at)
	if left <= 0 {
		delete(u.created, key)
		return 0
	}
	return left
}
