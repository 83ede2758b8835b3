package ui

import (
	"testing"
	"time"

	"github.com/mlkube/mlkube/tui/internal/kube"
)

func TestAge(t *testing.T) {
	now := time.Date(2026, 11, 21, 21, 23, 45, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		0:                              "0s",
		41 * time.Second:               "41s",
		119 * time.Second:              "119s",
		2 * time.Minute:                "2m",
		5*time.Minute + 30*time.Second: "5m",
		10*time.Minute + 5*time.Second: "10m",
		3*time.Hour + 5*time.Minute:    "3h5m",
		50 * time.Hour:                 "2d2h",
	} {
		if got := age(now, now.Add(-d)); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
	if got := age(now, time.Time{}); got != "-" {
		t.Errorf("age of nothing = %q", got)
	}
}

// The clock ticks exactly when an age on screen would read differently, and no sooner.
func TestNextAgeChange(t *testing.T) {
	now := time.Date(2026, 11, 21, 21, 23, 45, 0, time.UTC)
	for _, d := range []time.Duration{
		0, 300 * time.Millisecond, 41 * time.Second, 119*time.Second + 500*time.Millisecond, 2 * time.Minute,
		5*time.Minute + 30*time.Second, 3*time.Hour + 5*time.Minute + 7*time.Second, 7*time.Hour + 59*time.Minute,
		50*time.Hour + 10*time.Minute, 30 * 24 * time.Hour,
	} {
		created := now.Add(-d)
		next := nextAgeChange(now, created)
		if next <= 0 {
			t.Fatalf("age %s: next change in %s", d, next)
		}
		before, after := age(now.Add(next-time.Millisecond), created), age(now.Add(next), created)
		if before != age(now, created) {
			t.Errorf("age %s: reads %q before the tick in %s, %q now", d, before, next, age(now, created))
		}
		if after == before {
			t.Errorf("age %s: still %q at the tick in %s", d, after, next)
		}
	}
}

// A job whose creates the apiserver refuses says so in the list, not only in its conditions.
func TestListStateShowsARefusal(t *testing.T) {
	job := &kube.Job{State: "Running"}
	if got := listState(job); got != "Running" {
		t.Errorf("plain job: %q", got)
	}
	job.Conditions = []kube.Condition{{Type: "CreateRefused", Status: "False", Reason: "Created"}}
	if got := listState(job); got != "Running" {
		t.Errorf("cleared refusal: %q", got)
	}
	job.Conditions[0].Status, job.Conditions[0].Reason = "True", "Forbidden"
	if got := listState(job); got != "Running, CreateRefused" {
		t.Errorf("refused job: %q, want %q", got, "Running, CreateRefused")
	}
	suspended := &kube.Job{State: "Running", Conditions: []kube.Condition{{Type: "Suspended", Status: "True", Reason: "Suspended"}}}
	if got := listState(suspended); got != "Running, Suspended" {
		t.Errorf("suspended job: %q, want %q", got, "Running, Suspended")
	}
	// Kueue holds it: its verdict is the reason.
	suspended.Conditions[0].Reason = "Queued"
	if got := listState(suspended); got != "Running, Suspended, Queued" {
		t.Errorf("queued job: %q, want %q", got, "Running, Suspended, Queued")
	}
	suspended.Conditions[0].Status = "False"
	if got := listState(suspended); got != "Running" {
		t.Errorf("resumed job: %q", got)
	}
	waiting := &kube.Job{State: "Waiting", Conditions: []kube.Condition{{Type: "Running", Status: "False", Reason: "ImagePullBackOff", Message: "worker-0..1: cannot pull x"}}}
	if got := listState(waiting); got != "Waiting, ImagePullBackOff" {
		t.Errorf("waiting job: %q, want %q", got, "Waiting, ImagePullBackOff")
	}
	if got := listState(&kube.Job{}); got != "-" {
		t.Errorf("job with no status: %q", got)
	}
}
