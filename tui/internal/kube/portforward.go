package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// tensorboardPort is where TensorBoard listens in its pod when the Service does not say.
const tensorboardPort = 6006

// PortForward forwards a free local port to the pod behind a job's TensorBoard Service, as
// `kubectl port-forward svc/<service>` does, until ctx is done. It sends PortForwardReady with
// the local URL once it listens, or PortForwardFailed.
func (c *Client) PortForward(ctx context.Context, id int, namespace, service string) {
	go func() {
		pod, port, err := c.tensorboardPod(ctx, namespace, service)
		if err != nil {
			if ctx.Err() == nil {
				c.feed.Send(PortForwardFailed{ID: id, Err: err})
			}
			return
		}
		err = Forward(ctx, c.cfg, namespace, pod, port, func(url string) {
			c.feed.Send(PortForwardReady{ID: id, Pod: pod, LocalURL: url})
		})
		if ctx.Err() == nil {
			if err == nil {
				err = errors.New("the connection to the pod closed")
			}
			c.feed.Send(PortForwardFailed{ID: id, Err: err})
		}
	}()
}

// tensorboardPod finds a running pod behind the service and the pod port its first port
// targets.
func (c *Client) tensorboardPod(ctx context.Context, namespace, service string) (string, int, error) {
	svc, err := c.core.Services(namespace).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return "", 0, fmt.Errorf("TensorBoard service %s/%s: %w", namespace, service, Explain(err, Access{Verbs: []string{"get"}, Resource: "services", Namespace: namespace}, c.cfg.Host))
	}
	if len(svc.Spec.Selector) == 0 {
		return "", 0, fmt.Errorf("TensorBoard service %s/%s selects no pods", namespace, service)
	}
	pods, err := c.core.Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		return "", 0, fmt.Errorf("TensorBoard pods of %s/%s: %w", namespace, service, Explain(err, Access{Verbs: []string{"list"}, Resource: "pods", Namespace: namespace}, c.cfg.Host))
	}
	pod, err := pickPod(pods.Items)
	if err != nil {
		return "", 0, fmt.Errorf("TensorBoard service %s/%s: %w", namespace, service, err)
	}
	target := intstr.FromInt32(tensorboardPort)
	if len(svc.Spec.Ports) > 0 {
		target = svc.Spec.Ports[0].TargetPort
	}
	return pod.Name, podPort(pod, target), nil
}

// pickPod prefers a ready pod, then a running one, then the newest.
func pickPod(pods []corev1.Pod) (*corev1.Pod, error) {
	var running []*corev1.Pod
	var states []string
	for i := range pods {
		p := &pods[i]
		states = append(states, fmt.Sprintf("%s %s", p.Name, p.Status.Phase))
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		if len(states) == 0 {
			return nil, errors.New("no TensorBoard pod yet")
		}
		return nil, fmt.Errorf("no running TensorBoard pod (%s)", strings.Join(states, ", "))
	}
	sort.SliceStable(running, func(i, j int) bool {
		ri, rj := ready(running[i]), ready(running[j])
		if ri != rj {
			return ri
		}
		return running[j].CreationTimestamp.Before(&running[i].CreationTimestamp)
	})
	return running[0], nil
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podPort resolves a service's target port, which may name a container port.
func podPort(p *corev1.Pod, target intstr.IntOrString) int {
	if target.Type == intstr.Int {
		if target.IntVal > 0 {
			return int(target.IntVal)
		}
		return tensorboardPort
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == target.StrVal {
				return int(cp.ContainerPort)
			}
		}
	}
	return tensorboardPort
}

// Forward forwards a free local port to port of pod through the apiserver's SPDY port-forward
// subresource, calls ready with http://localhost:PORT once it listens, and returns when ctx is
// done (nil) or the forward breaks.
func Forward(ctx context.Context, cfg *rest.Config, namespace, pod string, port int, ready func(url string)) error {
	need := Access{Verbs: []string{"create"}, Resource: "pods/portforward", Namespace: namespace}
	local, err := freePort()
	if err != nil {
		return err
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return err
	}
	u, err := podSubresourceURL(cfg, namespace, pod, "portforward")
	if err != nil {
		return err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, readyCh := make(chan struct{}), make(chan struct{})
	var errOut lastLine
	fw, err := portforward.NewOnAddresses(dialer, []string{"localhost"}, []string{fmt.Sprintf("%d:%d", local, port)}, stop, readyCh, io.Discard, &errOut)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	select {
	case <-readyCh:
		ready(fmt.Sprintf("http://localhost:%d", local))
	case err := <-done:
		return explainForward(err, need, cfg.Host)
	case <-ctx.Done():
		close(stop)
		<-done
		return nil
	}
	select {
	case <-ctx.Done():
		close(stop)
		<-done
		return nil
	case err := <-done:
		if err == nil && errOut.String() != "" {
			err = errors.New(errOut.String())
		}
		return explainForward(err, need, cfg.Host)
	}
}

func podSubresourceURL(cfg *rest.Config, namespace, pod, sub string) (*url.URL, error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	base.Path = strings.TrimRight(base.Path, "/") + fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/%s", namespace, pod, sub)
	return base, nil
}

// explainForward: an upgrade refused by RBAC comes back as text, not as an API status.
func explainForward(err error, need Access, server string) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "forbidden") || strings.Contains(err.Error(), "Forbidden") {
		return fmt.Errorf("%w: you need %s (%v)", ErrForbidden, need, err)
	}
	return Explain(err, need, server)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free local port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lastLine keeps the last line written to it.
type lastLine struct {
	mu   sync.Mutex
	line string
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := strings.TrimSpace(string(p)); s != "" {
		l.line = s
	}
	return len(p), nil
}

func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.line
}
