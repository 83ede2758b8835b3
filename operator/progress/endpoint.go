package progress

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
)

// What a replica's framework container is given to report with.
const (
	EnvURL       = "MLKUBE_PROGRESS_URL"
	EnvTokenFile = "MLKUBE_PROGRESS_TOKEN_FILE"
	EnvCAFile    = "MLKUBE_PROGRESS_CA_FILE"
	// VolumeName is the projected volume holding the token and the CA bundle, at MountPath.
	VolumeName = "mlkube-progress"
	MountPath  = "/var/run/mlkube/progress"
	// tokenSeconds is the token's lifetime; the kubelet writes a new one into the file well
	// before it ends, which is why a trainer reads the file for every report.
	tokenSeconds = 3600
)

// Endpoint is the progress endpoint as the engine sees it: what it tells each replica, the
// namespaces' trust bundles, and the board of reports.
type Endpoint struct {
	// URL is where trainers reach the endpoint, e.g. https://mlkube-progress.mlkube-system.svc:443.
	URL   string
	Board *Board
	Trust *Trust
}

// Tell gives the framework container c of a replica pod of job where and how to report: the
// env, and a projected volume with the token and the CA bundle. What the template sets itself
// (a variable of the same name, a volume of the same name) is the template's.
func (e *Endpoint) Tell(kind *v1beta1.Kind, namespace, job string, pod *corev1.Pod, c *corev1.Container) {
	url := e.URL + PathPrefix + namespace + "/" + kind.Plural + "/" + job
	for _, v := range []corev1.EnvVar{
		{Name: EnvURL, Value: url},
		{Name: EnvTokenFile, Value: MountPath + "/token"},
		{Name: EnvCAFile, Value: MountPath + "/ca.crt"},
	} {
		if !hasEnv(c, v.Name) {
			c.Env = append(c.Env, v)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == VolumeName {
			return
		}
	}
	// A projected token needs the pod's service account named; the apiserver's admission names
	// "default" when the template does not, and so does this, for the validation before it.
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: VolumeName, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: Audience, ExpirationSeconds: ptr(int64(tokenSeconds)), Path: "token"}},
			// Optional: a namespace whose bundle could not be written still runs its jobs, and
			// the job says why its reports fail (the engine's ProgressUnavailable event).
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: TrustConfigMap},
				Items:                []corev1.KeyToPath{{Key: TrustKey, Path: "ca.crt"}},
				Optional:             ptr(true),
			}},
		}},
	}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeName, MountPath: MountPath, ReadOnly: true})
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, v := range c.Env {
		if v.Name == name {
			return true
		}
	}
	return false
}

// Progress is job uid's progress, from the board and what its status held before (prev).
func (e *Endpoint) Progress(uid types.UID, prev *v1beta1.JobProgress) (*v1beta1.JobProgress, bool) {
	return e.Board.Latest(uid, prev)
}

// Advanced is when job uid's step last grew, as reported to this process; zero if never.
func (e *Endpoint) Advanced(uid types.UID) time.Time { return e.Board.Advanced(uid) }

// Server serves the endpoint over TLS on addr until ctx ends: a manager's Runnable, on every
// replica of the operator (a follower answers 503).
type Server struct {
	Addr    string
	Handler *Handler
	Certs   *Certs
	// Listening, when set, gets the address once it listens (tests listen on port 0).
	Listening func(net.Addr)
}

// Start listens and serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	if s.Listening != nil {
		s.Listening(ln.Addr())
	}
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, s.Handler)
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{GetCertificate: s.Certs.GetCertificate, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// NeedLeaderElection is false: every replica serves, so the Service always has an answer.
func (s *Server) NeedLeaderElection() bool { return false }

// Prepare readies namespace ns for reports: its trust bundle holds this operator's CA.
func (e *Endpoint) Prepare(ctx context.Context, ns string) error { return e.Trust.Prepare(ctx, ns) }
