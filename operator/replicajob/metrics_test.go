package replicajob_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mlkube/mlkube/operator"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// The job metrics, scraped from the operator's metrics endpoint as Prometheus would: a job that
// restarts once and succeeds, and one that fails, counted by kind and namespace; the start
// histogram observed once per job that ran.
func TestJobMetrics(t *testing.T) {
	ns := namespace(t)
	addr := freeAddr(t)
	startOperator(t, ns, func(o *operator.Options) { o.MetricsBindAddress = addr })

	must(t, k8s.Create(context.Background(), standardJob(ns, "good")))
	waitPods(t, ns, podNames("good")...)
	kl := kubelet{T: t, NS: ns}
	kl.Running(podNames("good")...)
	waitJob(t, ns, "good", "running", inState(v1beta1.JobStateRunning, v1beta1.JobPhaseRunning))
	kl.Exit("good-worker-1", 137, "Error")
	waitJob(t, ns, "good", "restart counted", func(j *v1beta1.TfJob) error {
		if j.Status.Restarts != 1 {
			return errorf("restarts %d", j.Status.Restarts)
		}
		return nil
	})
	kl.Exit("good-master-0", 0, "Completed")
	waitJob(t, ns, "good", "done", inState(v1beta1.JobStateSucceeded, v1beta1.JobPhaseDone))

	must(t, k8s.Create(context.Background(), newJob(ns, "bad", replicaGroup(v1beta1.TfReplicaWorker, 1))))
	eventually(t, "bad-worker-0", func() error {
		if _, ok := listPods(t, ns)["bad-worker-0"]; !ok {
			return errorf("not yet")
		}
		return nil
	})
	kl.Exit("bad-worker-0", 1, "Error")
	waitJob(t, ns, "bad", "failed", inState(v1beta1.JobStateFailed, v1beta1.JobPhaseFailed))

	tf := map[string]string{"kind": "TfJob", "namespace": ns}
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"mlkube_jobs_created_total", tf, 2},
		{"mlkube_jobs_succeeded_total", tf, 1},
		{"mlkube_jobs_failed_total", map[string]string{"kind": "TfJob", "namespace": ns, "reason": "ExitCode"}, 1},
		{"mlkube_job_restarts_total", tf, 1},
		{"mlkube_job_start_seconds_count", tf, 1},
	}
	eventually(t, "the metrics", func() error {
		body, err := scrape("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		for _, w := range want {
			got, ok := sample(body, w.name, w.labels)
			if !ok || got != w.value {
				return errorf("%s%v = %v (found %t), want %v", w.name, w.labels, got, ok, w.value)
			}
		}
		return nil
	})
}

// freeAddr is a local address nothing listens on now, for an operator's metrics endpoint.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().String()
}

func scrape(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// sample finds the value of the series name{labels} in Prometheus' text format: exactly those
// labels, in any order.
func sample(body, name string, labels map[string]string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		set, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		pairs := strings.Split(set, ",")
		if len(pairs) != len(labels) {
			continue
		}
		match := true
		for _, p := range pairs {
			k, v, _ := strings.Cut(p, "=")
			if labels[k] != strings.Trim(v, `"`) {
				match = false
			}
		}
		if match {
			f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return f, err == nil
		}
	}
	return 0, false
}
