package progress

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Audience is the audience of the service-account token a replica reports with: a token the
// kubelet projected for mlkube's progress endpoint and nothing else, so that a token stolen from
// it opens nothing of the cluster, and the pod's own API token is never sent to us.
const Audience = "mlkube.io/progress"

// The claims the apiserver puts in a TokenReview's user extra for a token bound to a pod.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// reviewFor is how long the answer to a TokenReview is kept; past it a token is reviewed again,
// so a deleted pod's token stops working within it (its pod is looked up on every report too).
const (
	reviewFor       = 5 * time.Minute
	refusalFor      = 10 * time.Second // a bad token is not reviewed again for this long
	reviewsInFlight = 8                // a flood of tokens costs the apiserver at most this many reviews at once
)

// Reporter is the pod a token was issued to.
type Reporter struct {
	Namespace, Pod string
	UID            types.UID
}

// Reviewer says whose a token is, through the apiserver's TokenReview, remembering each answer
// for reviewFor.
type Reviewer struct {
	Client client.Client
	Now    func() time.Time

	mu    sync.Mutex
	known map[[32]byte]review
	slots chan struct{}
}

type review struct {
	who   Reporter
	err   error
	until time.Time
}

// errUnauthorized is a token the apiserver does not take for ours: the reply is 401.
var errUnauthorized = errors.New("unauthorized")

// Who is the pod token was issued to, or why it is refused.
func (v *Reviewer) Who(ctx context.Context, token string) (Reporter, error) {
	key := sha256.Sum256([]byte(token))
	now := v.now()
	v.mu.Lock()
	if v.known == nil {
		v.known = map[[32]byte]review{}
		v.slots = make(chan struct{}, reviewsInFlight)
	}
	r, ok := v.known[key]
	slots := v.slots
	v.mu.Unlock()
	if ok && now.Before(r.until) {
		return r.who, r.err
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return Reporter{}, ctx.Err()
	}
	who, err := v.review(ctx, token)
	<-slots
	if err != nil && !errors.Is(err, errUnauthorized) {
		return Reporter{}, err // the apiserver did not answer: nothing to remember
	}
	until := now.Add(reviewFor)
	if err != nil {
		until = now.Add(refusalFor)
	}
	v.mu.Lock()
	v.prune(now)
	v.known[key] = review{who: who, err: err, until: until}
	v.mu.Unlock()
	return who, err
}

func (v *Reviewer) review(ctx context.Context, token string) (Reporter, error) {
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}}}
	if err := v.Client.Create(ctx, tr); err != nil {
		return Reporter{}, fmt.Errorf("reviewing the token: %w", err)
	}
	st := tr.Status
	if !st.Authenticated {
		return Reporter{}, fmt.Errorf("%w: the token is not a service-account token of audience %s (%s)", errUnauthorized, Audience, st.Error)
	}
	ns, _, ok := serviceAccount(st.User.Username)
	pod, uid := first(st.User.Extra[extraPodName]), first(st.User.Extra[extraPodUID])
	if !ok || pod == "" || uid == "" {
		return Reporter{}, fmt.Errorf("%w: the token is not bound to a pod: report with the token the operator projects into the pod (MLKUBE_PROGRESS_TOKEN_FILE)", errUnauthorized)
	}
	return Reporter{Namespace: ns, Pod: pod, UID: types.UID(uid)}, nil
}

// serviceAccount splits system:serviceaccount:<namespace>:<name>.
func serviceAccount(user string) (ns, name string, ok bool) {
	var rest string
	const prefix = "system:serviceaccount:"
	if len(user) <= len(prefix) || user[:len(prefix)] != prefix {
		return "", "", false
	}
	rest = user[len(prefix):]
	for i := 0; i < len(rest); i++ {
		if rest[i] == ':' {
			return rest[:i], rest[i+1:], i > 0 && i < len(rest)-1
		}
	}
	return "", "", false
}

func first(v authnv1.ExtraValue) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// prune drops the answers past their time, so that the map holds at most the tokens of the
// last reviewFor. Called with mu held.
func (v *Reviewer) prune(now time.Time) {
	if len(v.known) < 1024 {
		return
	}
	for k, r := range v.known {
		if !now.Before(r.until) {
			delete(v.known, k)
		}
	}
}

func (v *Reviewer) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}
