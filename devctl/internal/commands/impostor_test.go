package commands

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlkube/mlkube/internal/jobtest"
	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// Pods labelled like a job's replicas that the job does not control (one with no owner, one
// another job owns, one naming the job but not its UID) are not the job's: devctl run, logs and
// logs -f never show their state, count them or print their logs, though one claims the same
// replica (worker-0) as one of the job's own.
func TestImpostorPodsAreNotTheJobs(t *testing.T) {
	ns := envtest(t)
	fake := useFakeLogs(t, nil)
	ctx := context.Background()
	for _, k := range v1beta1.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			victim, other := "victim-"+k.Label(), "other-"+k.Label()
			must(t, k8s.Create(ctx, jobtest.NewJob(k, ns, other)))
			otherUID := waitJob(t, k, ns, other).GetUID()
			yes := true
			owners := map[string][]metav1.OwnerReference{
				"nobody": nil,
				"other":  {{APIVersion: v1beta1.GroupVersion.String(), Kind: k.Name, Name: other, UID: otherUID, Controller: &yes}},
				"forged": {{APIVersion: v1beta1.GroupVersion.String(), Kind: k.Name, Name: victim, UID: "not-the-victims", Controller: &yes}},
			}
			var impostors []string
			impostor := func() {
				for who, refs := range owners {
					p := replicaPod(k, ns, fmt.Sprintf("impostor-%s-%s-%d", who, k.Label(), time.Now().UnixNano()), victim, "worker", 0)
					p.OwnerReferences = refs
					must(t, k8s.Create(ctx, p))
					impostors = append(impostors, p.Name)
					// Running, then failed: a replica state line, a log and a count if taken for one.
					setPod(t, ns, p.Name, podRunning)
				}
			}
			impostor() // before the job: they are there when the watch begins
			file := writeJob(t, t.TempDir(), victim+".yaml", manifest(t, k, victim))
			out, status := runToSuccess(t, k, ns, file, victim, func(v1beta1.Job) {
				impostor() // while it runs
				for _, p := range impostors {
					setPod(t, ns, p, podExited(1))
				}
			})
			wantReplicas := int32(0)
			for _, g := range waitJob(t, k, ns, victim).Groups() {
				wantReplicas += g.Replicas
			}
			check := func(what, out, status string) {
				t.Helper()
				for _, bad := range []string{"impostor-", "exit code 1"} {
					if strings.Contains(out+status, bad) {
						t.Errorf("%s shows an impostor (%q):\nstdout:\n%s\nstderr:\n%s", what, bad, out, status)
					}
				}
				if !strings.Contains(out, victim+"-worker-0 says bye") {
					t.Errorf("%s lacks the job's own worker-0:\n%s", what, out)
				}
			}
			check("devctl run", out, status)
			if want := fmt.Sprintf("all %d replicas have started", wantReplicas); !strings.Contains(status, want) {
				t.Errorf("devctl run: no %q in:\n%s", want, status)
			}
			for _, f := range []bool{false, true} {
				var o, s syncBuffer
				must(t, Logs(ctx, LogsOptions{Job: victim, Namespace: ns, Follow: f}, &o, &s))
				check(fmt.Sprintf("devctl logs -f=%v", f), o.String(), s.String())
			}
			fake.mu.Lock()
			defer fake.mu.Unlock()
			for _, opened := range fake.opened {
				if strings.HasPrefix(opened, "impostor-") {
					t.Errorf("opened the log of %s", opened)
				}
			}
		})
	}
}
