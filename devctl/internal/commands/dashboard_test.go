package commands

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/mlkube/mlkube/tui"
)

// fakeDashboard stands in for tfjob-tui and the kind kubeconfig for one test: it records the
// options the dashboard got and what their kubeconfig file held while it ran.
type fakeDashboard struct {
	calls     int
	got       tui.Options
	file      []byte
	fileMode  os.FileMode
	kindCalls []string
}

func fakeTUI(t *testing.T, kubeconfig []byte, kindErr error) *fakeDashboard {
	t.Helper()
	f := &fakeDashboard{}
	oldRun, oldKind := runDashboard, kindKubeconfig
	t.Cleanup(func() { runDashboard, kindKubeconfig = oldRun, oldKind })
	runDashboard = func(_ context.Context, o tui.Options) error {
		f.calls++
		f.got = o
		if o.Kubeconfig != "" {
			if st, err := os.Stat(o.Kubeconfig); err == nil {
				f.fileMode = st.Mode().Perm()
			}
			f.file, _ = os.ReadFile(o.Kubeconfig)
		}
		return nil
	}
	kindKubeconfig = func(_ context.Context, name string) ([]byte, error) {
		f.kindCalls = append(f.kindCalls, name)
		return kubeconfig, kindErr
	}
	return f
}

func TestDashboardPassesTheFlagsThrough(t *testing.T) {
	f := fakeTUI(t, nil, nil)
	o := DashboardOptions{Kubeconfig: "/some/kubeconfig", Context: "prod", Namespace: "team-a", NoColor: true}
	if err := Dashboard(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	want := tui.Options{Kubeconfig: "/some/kubeconfig", Context: "prod", Namespace: "team-a", NoColor: true}
	if f.calls != 1 || f.got != want {
		t.Errorf("the dashboard ran %d times with %+v, want once with %+v", f.calls, f.got, want)
	}
	if len(f.kindCalls) != 0 {
		t.Errorf("without --name, kind was asked for the kubeconfig of %v", f.kindCalls)
	}
}

func TestDashboardOfAKindCluster(t *testing.T) {
	kc := []byte("apiVersion: v1\nkind: Config\ncurrent-context: kind-multi\n")
	f := fakeTUI(t, kc, nil)
	if err := Dashboard(context.Background(), DashboardOptions{Name: "multi", AllNamespaces: true}); err != nil {
		t.Fatal(err)
	}
	if len(f.kindCalls) != 1 || f.kindCalls[0] != "multi" {
		t.Fatalf("kind was asked for %v, want the kubeconfig of multi", f.kindCalls)
	}
	if f.calls != 1 || f.got.Kubeconfig == "" || f.got.Context != "" || !f.got.AllNamespaces {
		t.Fatalf("the dashboard got %+v: want kind's kubeconfig, its own current context, every namespace", f.got)
	}
	if string(f.file) != string(kc) {
		t.Errorf("the dashboard's kubeconfig held %q, want kind's %q", f.file, kc)
	}
	if f.fileMode != 0o600 {
		t.Errorf("the kubeconfig copy, which holds the client key, has mode %v, want 0600", f.fileMode)
	}
	if _, err := os.Stat(f.got.Kubeconfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the kubeconfig copy %s is left after the dashboard ended (%v)", f.got.Kubeconfig, err)
	}
}

func TestDashboardNameConflicts(t *testing.T) {
	f := fakeTUI(t, nil, nil)
	for _, o := range []DashboardOptions{
		{Name: "mlkube", Context: "kind-mlkube"},
		{Name: "mlkube", Kubeconfig: "/some/kubeconfig"},
	} {
		err := Dashboard(context.Background(), o)
		if ExitCode(err) != ExitUsage {
			t.Errorf("%+v: %v (exit %d), want a usage error", o, err, ExitCode(err))
		}
	}
	if f.calls != 0 || len(f.kindCalls) != 0 {
		t.Errorf("a usage error still ran the dashboard (%d) or asked kind (%v)", f.calls, f.kindCalls)
	}
}

func TestDashboardWithoutTheKindCluster(t *testing.T) {
	gone := errors.New("no cluster gone: create it with `devctl up --name gone`")
	f := fakeTUI(t, nil, gone)
	if err := Dashboard(context.Background(), DashboardOptions{Name: "gone"}); !errors.Is(err, gone) {
		t.Errorf("got %v, want kind's error", err)
	}
	if f.calls != 0 {
		t.Error("the dashboard ran without a cluster")
	}
}
