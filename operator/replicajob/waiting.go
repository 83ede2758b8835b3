package replicajob

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Why a job waits. A replica whose pod is on its way (being scheduled, pulling, creating its
// containers) needs nothing; one whose pod waits on something that will not pass by itself (an
// image no one can pull, no node that fits, a missing secret) needs its user. The engine reads
// that from the pods' statuses alone, gathers the replicas that wait for the same thing, and
// says it in the job's Running condition (reason: what a program matches, e.g.
// ImagePullBackOff; message: which replicas, and the kubelet's or the scheduler's words), with
// the job's state Waiting. The kubelet's retries alternate ErrImagePull and ImagePullBackOff and
// reword the message each time; both read here as one reason and one message, so a job stuck
// on an image costs one status write, not one per retry.

// stuck is why one replica cannot go on by itself; zero when it can.
type stuck struct {
	Reason, Message string
}

// onItsWay are the waiting reasons of a container that is getting there.
var onItsWay = map[string]bool{"": true, "ContainerCreating": true, "PodInitializing": true}

// backOffPull is the kubelet's back-off message, which wraps the pull's own error:
// `Back-off pulling image "x": ErrImagePull: <the pull's message>`.
var backOffPull = regexp.MustCompile(`^Back-off pulling image "[^"]*"(?:: [A-Za-z]+: )?`)

// backOffDelay is the kubelet's count-down in a restart back-off ("back-off 40s restarting
// failed container=..."), which changes on every retry.
var backOffDelay = regexp.MustCompile(`back-off [0-9hms.]+ `)

// whyStuck is why pod cannot go on by itself; zero when it is on its way.
func whyStuck(pod *corev1.Pod) stuck {
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		w := cs.State.Waiting
		if w == nil || onItsWay[w.Reason] {
			continue
		}
		if v1beta1.ImagePullReasons[w.Reason] {
			detail := strings.TrimSpace(backOffPull.ReplaceAllString(w.Message, ""))
			msg := "cannot pull " + cs.Image
			if detail != "" {
				msg += ": " + detail
			}
			return stuck{Reason: "ImagePullBackOff", Message: msg}
		}
		msg := backOffDelay.ReplaceAllString(w.Message, "back-off ")
		if msg == "" {
			msg = "container " + cs.Name + " is waiting"
		}
		return stuck{Reason: w.Reason, Message: msg}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return stuck{Reason: c.Reason, Message: "cannot be scheduled: " + c.Message}
		}
	}
	return stuck{}
}

// waitingEvent is the Warning event of a job that came to wait on something, or on something
// else, as its status now says; nil when it says nothing new.
func waitingEvent(before, after *v1beta1.JobStatus) *event {
	if after.State != v1beta1.JobStateWaiting {
		return nil
	}
	now := meta.FindStatusCondition(after.Conditions, v1beta1.JobRunning)
	was := meta.FindStatusCondition(before.Conditions, v1beta1.JobRunning)
	if now == nil || (before.State == v1beta1.JobStateWaiting && was != nil && was.Reason == now.Reason && was.Message == now.Message) {
		return nil
	}
	return &event{kind: corev1.EventTypeWarning, reason: now.Reason, action: "Start", note: now.Message}
}

// stuckReplicas gathers the replicas that wait for the same thing, in the order they were met.
type stuckReplicas struct {
	order []stuck
	who   map[stuck][]replicaRef
}

type replicaRef struct {
	typ   string
	index int
}

func (s *stuckReplicas) add(why stuck, typ string, index int) {
	if s.who == nil {
		s.who = map[stuck][]replicaRef{}
	}
	if _, ok := s.who[why]; !ok {
		s.order = append(s.order, why)
	}
	s.who[why] = append(s.who[why], replicaRef{typ, index})
}

// maxWaitingMessage keeps the condition's message readable, and well under the 32 KiB the
// apiserver allows one.
const maxWaitingMessage = 4096

// condition is the Running condition's reason and message for the replicas gathered: the first
// reason met, and each reason's replicas and words, e.g.
// "worker-0..3, ps-0..1: cannot pull kubeflow/tf-dist-mnist-test:latest: ... no such host".
func (s *stuckReplicas) condition() (reason, msg string) {
	if len(s.order) == 0 {
		return "", ""
	}
	var parts []string
	for _, why := range s.order {
		parts = append(parts, ranges(s.who[why])+": "+why.Message)
	}
	msg = strings.Join(parts, "; ")
	if len(msg) > maxWaitingMessage {
		msg = msg[:maxWaitingMessage-3] + "..."
	}
	return s.order[0].Reason, msg
}

// ranges names replicas the short way: "worker-0..3, ps-1", in the order given (spec order).
func ranges(refs []replicaRef) string {
	var out []string
	for i := 0; i < len(refs); {
		j := i
		for j+1 < len(refs) && refs[j+1].typ == refs[i].typ && refs[j+1].index == refs[j].index+1 {
			j++
		}
		name := strings.ToLower(refs[i].typ) + "-" + strconv.Itoa(refs[i].index)
		if j > i {
			name += fmt.Sprintf("..%d", refs[j].index)
		}
		out = append(out, name)
		i = j + 1
	}
	return strings.Join(out, ", ")
}
