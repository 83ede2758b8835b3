package chaos

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mlkube/mlkube/internal/jobtest"
)

var (
	// operatorBin is the operator's binary, built once for all tests.
	operatorBin string
	// kubeconfig lets the operator processes reach the test apiserver.
	kubeconfig string
	// apiserverCerts is fixed, not a temporary directory envtest picks: a restarted apiserver
	// then serves the same certificates and trusts the same client CA, as a real one does, so
	// clients reconnect instead of failing TLS.
	apiserverCerts string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mlkube-chaos")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	jobtest.AfterAll(func() { os.RemoveAll(dir) })
	apiserverCerts = filepath.Join(dir, "apiserver")
	if err := os.Mkdir(apiserverCerts, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	jobtest.Main(m, func() {
		if err := prepare(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}, func(env *envtest.Environment) {
		env.ControlPlane.GetAPIServer().CertDir = apiserverCerts
	})
}

// prepare builds the operator and writes a kubeconfig for it.
func prepare(dir string) error {
	operatorBin = filepath.Join(dir, "mlkube-operator")
	build := exec.Command("go", "build", "-o", operatorBin, "github.com/mlkube/mlkube/operator/cmd/mlkube-operator")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the operator: %v\n%s", err, out)
	}
	user, err := jobtest.Env.AddUser(envtest.User{Name: "chaos-operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	return os.WriteFile(kubeconfig, data, 0o600)
}

// operatorProcess is one operator replica, restarted whenever it exits, as the kubelet restarts
// a crashed container, until stop.
type operatorProcess struct {
	t       *testing.T
	name    string
	args    []string
	restart bool
	log     *os.File
	metrics string // host:port of its metrics endpoint

	mu      sync.Mutex
	cmd     *exec.Cmd
	starts  int
	stopped bool
	killed  bool // by the test, not of its own accord
	done    chan struct{}
}

// startOperator runs the operator binary on namespace ns with extra flags. Leader election,
// when on, keeps its lease in ns. The process and its restarts log to one file, shown when the
// test fails and kept in $MLKUBE_CHAOS_LOGS when that is set.
func startOperator(t *testing.T, name, ns string, restart bool, flags ...string) *operatorProcess {
	t.Helper()
	dir := os.Getenv("MLKUBE_CHAOS_LOGS") // kept after the run; else gone with the test
	if dir == "" {
		dir = t.TempDir()
	}
	jobtest.Must(t, os.MkdirAll(dir, 0o755))
	log, err := os.Create(filepath.Join(dir, t.Name()+"-"+name+".log"))
	jobtest.Must(t, err)
	p := &operatorProcess{t: t, name: name, restart: restart, log: log, metrics: freeAddr(t), done: make(chan struct{})}
	p.args = append([]string{
		"--namespace=" + ns, "--leader-election-namespace=" + ns,
		"--metrics-bind-address=" + p.metrics, "--health-probe-bind-address=0", "--zap-log-level=debug",
	}, flags...)
	jobtest.Must(t, p.spawn())
	go p.supervise()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log (last lines):\n%s", name, tail(log.Name(), 40))
		}
	})
	return p
}

func (p *operatorProcess) spawn() error {
	cmd := exec.Command(operatorBin, p.args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		return err
	}
	p.mu.Lock()
	p.cmd = cmd
	p.starts++
	p.mu.Unlock()
	return nil
}

// supervise waits for the process and starts it again after it exits, unless stopped. A
// process that exits on its own (it found no apiserver, it lost its lease) is started again
// after a delay that doubles each time, up to 5 s, as the kubelet backs off a crashing
// container; one the test killed is started again at once.
func (p *operatorProcess) supervise() {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	for {
		p.mu.Lock()
		cmd := p.cmd
		p.mu.Unlock()
		started := time.Now()
		_ = cmd.Wait()
		p.mu.Lock()
		stopped, killed := p.stopped, p.killed
		p.killed = false
		p.mu.Unlock()
		if stopped || !p.restart {
			return
		}
		delay := 100 * time.Millisecond
		if !killed {
			if time.Since(started) > 10*time.Second {
				backoff = 100 * time.Millisecond
			}
			delay, backoff = backoff, min(2*backoff, 5*time.Second)
		}
		fmt.Fprintf(p.log, "=== chaos: %s exited (%v); starting it again in %v\n", p.name, cmd.ProcessState, delay)
		time.Sleep(delay)
		if err := p.spawn(); err != nil {
			p.t.Errorf("restarting %s: %v", p.name, err)
			return
		}
	}
}

// kill sends SIGKILL: no clean-up runs, no lease is released.
func (p *operatorProcess) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.signal(syscall.SIGKILL)
}

const sigterm = syscall.SIGTERM

func (p *operatorProcess) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.log, "=== chaos: %s gets %s\n", p.name, unix.SignalName(sig))
	_ = p.cmd.Process.Signal(sig)
}

// stop ends the process for good and waits for it.
func (p *operatorProcess) stop() {
	p.mu.Lock()
	already := p.stopped
	p.stopped = true
	p.mu.Unlock()
	if !already {
		p.signal(syscall.SIGKILL)
	}
	<-p.done
}

// exited says whether the process ended and is not coming back.
func (p *operatorProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// leading reads the process's own leader election gauge from its metrics endpoint.
func (p *operatorProcess) leading() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "leader_election_master_status{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v == 1
		}
	}
	return false
}

// freeAddr is a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	jobtest.Must(t, err)
	defer l.Close()
	return l.Addr().String()
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
