package progress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Path is where a job's reports go: PathPrefix + <namespace>/<plural>/<name>.
const PathPrefix = "/v1/progress/namespaces/"

// The rate one pod may report at: a report a second, bursts of a few (the last steps of a run).
const (
	perPodRate  = 1.0
	perPodBurst = 5
)

// Handler serves the progress endpoint: it checks who reports, for which job, and what, then
// records the report on the board. Every refusal says why, in a status code and a line of text.
type Handler struct {
	Board    *Board
	Reviewer *Reviewer
	// Pods reads the job's pods (the operator's cache of them).
	Pods client.Reader
	// Ready says whether this process acts on jobs: a replica of the operator that is not the
	// leader answers 503, and the trainer's next report finds the leader.
	Ready func() bool

	limits limiter
}

// refusal is an HTTP error with the words for the trainer's log.
type refusal struct {
	code int
	msg  string
	// retry, for 429 and 503, is when to try again.
	retry time.Duration
}

func (r *refusal) Error() string { return r.msg }

func refuse(code int, format string, args ...any) *refusal {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if err := h.serve(req); err != nil {
		var r *refusal
		if !errors.As(err, &r) {
			log.FromContext(req.Context()).Error(err, "progress report")
			r = &refusal{code: http.StatusServiceUnavailable, msg: "the operator cannot check the report now: " + err.Error(), retry: 5 * time.Second}
		}
		if r.retry > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(r.retry.Seconds()))))
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(r.code)
		fmt.Fprintln(w, r.msg)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) serve(req *http.Request) error {
	if req.Method != http.MethodPost {
		return refuse(http.StatusMethodNotAllowed, "a progress report is a POST")
	}
	if h.Ready != nil && !h.Ready() {
		return &refusal{code: http.StatusServiceUnavailable, msg: "this replica of the operator is not the leader", retry: time.Second}
	}
	job, err := target(req.URL.Path)
	if err != nil {
		return err
	}
	who, err := h.who(req)
	if err != nil {
		return err
	}
	if who.Namespace != job.Namespace {
		return refuse(http.StatusForbidden, "the token is of namespace %s, not the job's %s", who.Namespace, job.Namespace)
	}
	if job.UID, err = h.replicaOf(req.Context(), job, who); err != nil {
		return err
	}
	if wait := h.limits.take(who.UID, time.Now()); wait > 0 {
		return &refusal{code: http.StatusTooManyRequests, retry: wait,
			msg: fmt.Sprintf("pod %s reports more often than %g a second (bursts of %d): report every few seconds", who.Pod, perPodRate, perPodBurst)}
	}
	r, err := read(req.Body)
	if err != nil {
		return err
	}
	h.Board.Record(job, who.Pod, r)
	return nil
}

// target is the job a report's path names.
func target(path string) (JobRef, error) {
	parts := strings.Split(strings.TrimPrefix(path, PathPrefix), "/")
	if !strings.HasPrefix(path, PathPrefix) || len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return JobRef{}, refuse(http.StatusNotFound, "report to %s<namespace>/<plural>/<name>, the URL in MLKUBE_PROGRESS_URL", PathPrefix)
	}
	kind := v1beta1.KindNamed(parts[1])
	if kind == nil || kind.Plural != parts[1] {
		return JobRef{}, refuse(http.StatusNotFound, "no job kind has the plural %q (%s)", parts[1], v1beta1.KindNames("or"))
	}
	return JobRef{Kind: kind, Namespace: parts[0], Name: parts[2]}, nil
}

func (h *Handler) who(req *http.Request) (Reporter, error) {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return Reporter{}, refuse(http.StatusUnauthorized, "no token: send the file MLKUBE_PROGRESS_TOKEN_FILE names as 'Authorization: Bearer <token>'")
	}
	who, err := h.Reviewer.Who(req.Context(), strings.TrimSpace(token))
	if errors.Is(err, errUnauthorized) {
		return Reporter{}, refuse(http.StatusUnauthorized, "%s", err.Error())
	}
	return who, err
}

// replicaOf checks that the token's pod is a live replica of job, and returns the job's UID.
func (h *Handler) replicaOf(ctx context.Context, job JobRef, who Reporter) (types.UID, error) {
	var pod corev1.Pod
	err := h.Pods.Get(ctx, client.ObjectKey{Namespace: who.Namespace, Name: who.Pod}, &pod)
	if apierrors.IsNotFound(err) {
		return "", refuse(http.StatusForbidden, "pod %s is no replica of %s", who.Pod, job.Kind.Ref(job.Name))
	}
	if err != nil {
		return "", err
	}
	ref := metav1.GetControllerOfNoCopy(&pod)
	switch {
	case pod.UID != who.UID:
		return "", refuse(http.StatusForbidden, "pod %s is not the pod the token was issued to (it was created again)", who.Pod)
	case pod.DeletionTimestamp != nil:
		return "", refuse(http.StatusForbidden, "pod %s is being deleted", who.Pod)
	case ref == nil || ref.Kind != job.Kind.Name || ref.Name != job.Name:
		return "", refuse(http.StatusForbidden, "pod %s is no replica of %s", who.Pod, job.Kind.Ref(job.Name))
	}
	return ref.UID, nil
}

// read decodes a report's body, MaxReportBytes at most.
func read(body io.Reader) (Report, error) {
	b, err := io.ReadAll(io.LimitReader(body, MaxReportBytes+1))
	if err != nil {
		return Report{}, refuse(http.StatusBadRequest, "reading the report: %v", err)
	}
	if len(b) > MaxReportBytes {
		return Report{}, refuse(http.StatusRequestEntityTooLarge, "the report is over %d bytes: send the step, totals and at most %d metrics", MaxReportBytes, MaxMetrics)
	}
	r, err := Decode(b)
	if err != nil {
		return Report{}, refuse(http.StatusBadRequest, "%s", err.Error())
	}
	return r, nil
}

// limiter is a token bucket per pod.
type limiter struct {
	mu      sync.Mutex
	buckets map[types.UID]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// take spends a token of pod's bucket; when there is none, it returns how long until there is.
func (l *limiter) take(pod types.UID, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[types.UID]*bucket{}
	}
	b := l.buckets[pod]
	if b == nil {
		l.prune(now)
		b = &bucket{tokens: perPodBurst, at: now}
		l.buckets[pod] = b
	}
	b.tokens = min(perPodBurst, b.tokens+now.Sub(b.at).Seconds()*perPodRate)
	b.at = now
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) / perPodRate * float64(time.Second))
	}
	b.tokens--
	return 0
}

// prune forgets the pods whose bucket is full again: they are as if never seen.
func (l *limiter) prune(now time.Time) {
	if len(l.buckets) < 4096 {
		return
	}
	for uid, b := range l.buckets {
		if now.Sub(b.at).Seconds()*perPodRate >= perPodBurst {
			delete(l.buckets, uid)
		}
	}
}
