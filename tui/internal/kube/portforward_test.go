package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// fakeKubelet answers the apiserver's pods/portforward subresource the way the kubelet does
// (the SPDY portforward.k8s.io protocol: an error and a data stream per connection), and
// connects data streams to target.
func fakeKubelet(t *testing.T, wantPath, wantPort, target string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wantPath {
			http.Error(w, "no such pod", http.StatusNotFound)
			return
		}
		if _, err := httpstream.Handshake(r, w, []string{"portforward.k8s.io"}); err != nil {
			return
		}
		streams := make(chan httpstream.Stream, 8)
		conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, replySent <-chan struct{}) error {
			go func() { <-replySent; streams <- s }()
			return nil
		})
		if conn == nil {
			return
		}
		defer conn.Close()
		for {
			select {
			case s := <-streams:
				if s.Headers().Get("streamType") != "data" {
					continue
				}
				if got := s.Headers().Get("port"); got != wantPort {
					t.Errorf("forwarded to port %s, want %s", got, wantPort)
				}
				go func() {
					c, err := net.Dial("tcp", target)
					if err != nil {
						_ = s.Reset()
						return
					}
					go func() { _, _ = io.Copy(c, s); _ = c.(*net.TCPConn).CloseWrite() }()
					_, _ = io.Copy(s, c)
					_ = s.Close()
				}()
			case <-conn.CloseChan():
				return
			}
		}
	}))
}

func TestForward(t *testing.T) {
	tensorboard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<title>TensorBoard</title>")
	}))
	defer tensorboard.Close()
	apiserver := fakeKubelet(t, "/api/v1/namespaces/team-a/pods/mnist-tensorboard-0/portforward", "6006", strings.TrimPrefix(tensorboard.URL, "http://"))
	defer apiserver.Close()

	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Forward(ctx, &rest.Config{Host: apiserver.URL}, "team-a", "mnist-tensorboard-0", 6006, func(u string) { urls <- u })
	}()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatalf("Forward ended before it listened: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Forward did not listen within 10s")
	}
	if !strings.HasPrefix(url, "http://localhost:") {
		t.Fatalf("url = %q, want http://localhost:PORT", url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s through the forward: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "TensorBoard") {
		t.Fatalf("GET %s = %q, want TensorBoard's page", url, body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Forward returned %v after its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Forward did not stop within 10s of its context ending")
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second); err == nil {
		t.Fatalf("%s still listens after the forward stopped", url)
	}
}

func TestForwardToMissingPod(t *testing.T) {
	apiserver := fakeKubelet(t, "/api/v1/namespaces/team-a/pods/other/portforward", "6006", "127.0.0.1:1")
	defer apiserver.Close()
	err := Forward(context.Background(), &rest.Config{Host: apiserver.URL}, "team-a", "gone", 6006, func(string) {
		t.Error("ready called for a pod that does not exist")
	})
	if err == nil {
		t.Fatal("Forward to a missing pod returned nil")
	}
}

func TestExplainForwardForbidden(t *testing.T) {
	err := explainForward(errors.New(`error upgrading connection: pods "tb" is forbidden: User "viewer" cannot create resource "pods/portforward" in API group "" in the namespace "team-a"`),
		Access{Verbs: []string{"create"}, Resource: "pods/portforward", Namespace: "team-a"}, "https://x")
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "you need create on pods/portforward in namespace team-a") {
		t.Fatalf("got %v", err)
	}
}

func TestPickPod(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, ready bool, age time.Duration) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Now().Add(-age))}}
		p.Status.Phase = phase
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		return p
	}
	got, err := pickPod([]corev1.Pod{
		pod("pending", corev1.PodPending, false, time.Minute),
		pod("running-old", corev1.PodRunning, true, time.Hour),
		pod("running-unready", corev1.PodRunning, false, time.Second),
		pod("running-new", corev1.PodRunning, true, time.Minute),
	})
	if err != nil || got.Name != "running-new" {
		t.Fatalf("picked %v, %v; want running-new (ready, newest)", got, err)
	}
	_, err = pickPod([]corev1.Pod{pod("pending", corev1.PodPending, false, time.Minute)})
	if err == nil || !strings.Contains(err.Error(), "pending Pending") {
		t.Fatalf("err = %v, want it to list the pods' phases", err)
	}
}

func TestPodPort(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 6007}}}}}}
	for target, want := range map[intstr.IntOrString]int{
		intstr.FromInt32(6006):    6006,
		intstr.FromString("http"): 6007,
		intstr.FromString("nope"): 6006,
		intstr.FromInt32(0):       6006,
	} {
		if got := podPort(p, target); got != want {
			t.Errorf("podPort(%v) = %d, want %d", target.String(), got, want)
		}
	}
}
