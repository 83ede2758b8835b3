package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// The variables the MXJob operator sets on every replica, as MXNet's ps-lite reads them, and
// POD_IP, which a pod template may add from the downward API (status.podIP).
const (
	envDMLCRole      = "DMLC_ROLE"
	envDMLCRootURI   = "DMLC_PS_ROOT_URI"
	envDMLCRootPort  = "DMLC_PS_ROOT_PORT"
	envDMLCNumServer = "DMLC_NUM_SERVER"
	envDMLCNumWorker = "DMLC_NUM_WORKER"
	envPodIP         = "POD_IP"
)

// DMLC roles as DMLC_ROLE spells them.
const (
	roleScheduler = "scheduler"
	roleServer    = "server"
	roleWorker    = "worker"
)

// defaultServerPort is where a server listens without --port: an MXJob replica's default port,
// the one the operator opens on the pod and its service.
const defaultServerPort = 9091

// DMLCConfig is what an MXJob replica is told: its role, where the scheduler is, and how many
// servers and workers the scheduler waits for.
type DMLCConfig struct {
	Role      string
	RootURI   string // the scheduler's host
	RootPort  int
	NumServer int
	NumWorker int
	PodIP     string // POD_IP: the address a server registers; empty: the one the scheduler sees
}

// Root is the scheduler's address.
func (c DMLCConfig) Root() string { return net.JoinHostPort(c.RootURI, strconv.Itoa(c.RootPort)) }

// count is how many replicas of role the job has.
func (c DMLCConfig) count(role string) int {
	if role == roleServer {
		return c.NumServer
	}
	return c.NumWorker
}

// useDMLC tells whether the trainer runs in DMLC mode: no TF_CONFIG (nor --tf-config), and
// DMLC_ROLE set.
func useDMLC(tfConfigFlag string, getenv func(string) string) bool {
	return noTFConfig(tfConfigFlag, getenv) && strings.TrimSpace(getenv(envDMLCRole)) != ""
}

// noTFConfig tells whether neither --tf-config nor TF_CONFIG is set: TF_CONFIG wins over the
// other modes' variables.
func noTFConfig(tfConfigFlag string, getenv func(string) string) bool {
	return strings.TrimSpace(tfConfigFlag) == "" && strings.TrimSpace(getenv(envTFConfig)) == ""
}

// loadDMLCConfig reads and checks the DMLC_* variables and POD_IP.
func loadDMLCConfig(getenv func(string) string) (DMLCConfig, error) {
	env := func(name string) string { return strings.TrimSpace(getenv(name)) }
	c := DMLCConfig{Role: strings.ToLower(env(envDMLCRole)), RootURI: env(envDMLCRootURI), PodIP: env(envPodIP)}
	switch c.Role {
	case roleScheduler, roleServer, roleWorker:
	default:
		return c, fmt.Errorf("%s=%q is not one of scheduler, server, worker", envDMLCRole, env(envDMLCRole))
	}
	if c.RootURI == "" {
		return c, fmt.Errorf("%s is not set: it is the scheduler's host, which the MXJob operator sets on every replica "+
			"(e.g. %s=127.0.0.1 to run by hand)", envDMLCRootURI, envDMLCRootURI)
	}
	count := func(name string, min int) (int, error) {
		raw := env(name)
		if raw == "" {
			return 0, fmt.Errorf("%s is not set: the MXJob operator sets it on every replica", name)
		}
		return envInt(name, raw, min)
	}
	var err error
	if c.RootPort, err = count(envDMLCRootPort, 1); err == nil && c.RootPort > 65535 {
		err = fmt.Errorf("%s=%d is not a port (1-65535)", envDMLCRootPort, c.RootPort)
	}
	if err != nil {
		return c, err
	}
	if c.NumServer, err = count(envDMLCNumServer, 0); err != nil {
		return c, err
	}
	if c.NumWorker, err = count(envDMLCNumWorker, 1); err != nil {
		return c, fmt.Errorf("%w: an MXJob needs a WORKER group, or nobody trains", err)
	}
	if c.PodIP != "" && net.ParseIP(c.PodIP) == nil {
		return c, fmt.Errorf("%s=%q is not an IP address (set it from the downward API: fieldPath status.podIP)", envPodIP, c.PodIP)
	}
	if c.Role == roleServer && c.NumServer == 0 {
		return c, fmt.Errorf("%s=server but %s=0: the replicas disagree about the servers", envDMLCRole, envDMLCNumServer)
	}
	return c, nil
}

// hostIndex is the index an MXJob pod's hostname gives a replica of role: the pod, its hostname
// and its service are named <job>-<role>-<index>. It is -1 for any other hostname, or an index
// past the count, and the scheduler then hands out indices in the order replicas register.
func hostIndex(hostname, role string, count int) int {
	prefix, num, ok := cutLast(hostname, "-")
	if !ok || !(prefix == role || strings.HasSuffix(prefix, "-"+role)) {
		return -1
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n >= count || strconv.Itoa(n) != num {
		return -1
	}
	return n
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// replicaName is how logs name a DMLC replica: role-index, or role-? before it has an index.
func replicaName(role string, index int) string {
	if index < 0 {
		return role + "-?"
	}
	return fmt.Sprintf("%s-%d", role, index)
}
