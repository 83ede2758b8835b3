package replicajob

import "time"

// createdTTL is how long a created pod or service is taken to exist while the cache does not show
// it yet. Its watch event takes milliseconds, seconds on a busy apiserver; after createdTTL the
// engine trusts the cache again (someone may have deleted the object before it was seen).
const createdTTL = 30 * time.Second

// The pods and services this process created that its cache has not shown yet are remembered
// in the job's memory (memory.created). Without it every reconcile in that short window (the
// job's own status write brings one) would create them again, only to be answered 409
// AlreadyExists: measured at up to nine wasted requests per job when jobs are few and
// reconciles quick.

// seen forgets an object the cache shows.
func (m *memory) seen(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetLocked(key)
}

// forgetLocked forgets an object, and the map once it is empty: a map keeps the room of all it
// ever held, and a job's nine objects are all seen within seconds of their creates (a thousand
// running jobs kept 0.9 MB of empty maps).
func (m *memory) forgetLocked(key string) {
	delete(m.created, key)
	if len(m.created) == 0 {
		m.created = nil
	}
}

// add records an object just created.
func (m *memory) add(key string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.created == nil {
		m.created = map[string]time.Time{}
	}
	m.created[key] = now
}

// pending says how much longer an object not in the cache is taken to exist; 0 means it is not
// (never created here, or created longer than createdTTL ago).
func (m *memory) pending(key string, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.created[key]
	if !ok {
		return 0
	}
	left := createdTTL - now.Sub(at)
	if left <= 0 {
		m.forgetLocked(key)
		return 0
	}
	return left
}
