package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
)

// envTFConfig is the variable the TfJob operator sets on every replica.
const envTFConfig = "TF_CONFIG"

// Replica types as TF_CONFIG spells them.
const (
	typeMaster    = "master"
	typeChief     = "chief"
	typeWorker    = "worker"
	typePS        = "ps"
	typeEvaluator = "evaluator"
)

// TFConfig is TensorFlow's TF_CONFIG: every replica's address by lower-case type, and which task
// this process is. Evaluators are not in the cluster; they only get their task.
type TFConfig struct {
	Cluster     map[string][]string `json:"cluster"`
	Task        Task                `json:"task"`
	Environment string              `json:"environment,omitempty"`
}

// Task names one process of the cluster.
type Task struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

const tfConfigExample = `{"cluster":{"ps":["localhost:2230"],"worker":["localhost:2231"]},"task":{"type":"worker","index":0}}`

// loadTFConfig parses override (--tf-config) when given, else the TF_CONFIG variable.
func loadTFConfig(override string, getenv func(string) string) (TFConfig, error) {
	raw, from := override, "--tf-config"
	if strings.TrimSpace(raw) == "" {
		raw, from = getenv(envTFConfig), envTFConfig
	}
	if strings.TrimSpace(raw) == "" {
		return TFConfig{}, fmt.Errorf("%s is not set: the TfJob operator sets it on every replica; "+
			"to run by hand, set it or pass --tf-config, e.g. %s='%s'; in an MXJob, %s and the other DMLC_* variables take its place, "+
			"in a PyTorchJob %s, %s, %s and %s, in a JAXJob %s, %s, %s and %s",
			envTFConfig, envTFConfig, tfConfigExample, envDMLCRole, envMasterAddr, envMasterPort, envWorldSize, envRank,
			envCoordinatorAddress, envCoordinatorPort, envNumProcesses, envProcessID)
	}
	return parseTFConfig(raw, from)
}

// parseTFConfig decodes and checks raw; from names where it came from, for the errors.
func parseTFConfig(raw, from string) (TFConfig, error) {
	var c TFConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return c, fmt.Errorf("%s is not valid JSON (%v); it looks like %s", from, err, tfConfigExample)
	}
	// TensorFlow writes lower case; accept the operator's upper-case type names too.
	cluster := map[string][]string{}
	for typ, addrs := range c.Cluster {
		cluster[strings.ToLower(typ)] = append(cluster[strings.ToLower(typ)], addrs...)
	}
	c.Cluster = cluster
	c.Task.Type = strings.ToLower(c.Task.Type)
	if err := c.validate(); err != nil {
		return c, fmt.Errorf("%s: %w", from, err)
	}
	return c, nil
}

func (c TFConfig) validate() error {
	switch c.Task.Type {
	case typeMaster, typeChief, typeWorker, typePS, typeEvaluator:
	case "":
		return fmt.Errorf("task.type is missing; it is one of master, chief, worker, ps, evaluator")
	default:
		return fmt.Errorf("task.type %q is not one of master, chief, worker, ps, evaluator", c.Task.Type)
	}
	if c.Task.Index < 0 {
		return fmt.Errorf("task.index %d is negative", c.Task.Index)
	}
	if c.Task.Type != typeEvaluator && c.Task.Index >= len(c.Cluster[c.Task.Type]) {
		return fmt.Errorf("task %s is not in the cluster, which has %d %s address(es)",
			c.Name(), len(c.Cluster[c.Task.Type]), c.Task.Type)
	}
	if len(c.Cluster[typeMaster]) > 0 && len(c.Cluster[typeChief]) > 0 {
		return fmt.Errorf("the cluster has both a master and a chief; one of them decides, so there can be only one")
	}
	if c.deciderType() == "" {
		return fmt.Errorf("the cluster has no master, chief or worker: nobody would train")
	}
	for typ, addrs := range c.Cluster {
		for i, a := range addrs {
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				return fmt.Errorf("cluster.%s[%d] = %q is not host:port", typ, i, a)
			}
		}
	}
	return nil
}

// Name is how logs name this replica, e.g. worker-1.
func (c TFConfig) Name() string { return fmt.Sprintf("%s-%d", c.Task.Type, c.Task.Index) }

// Self is this replica's own address; empty for an evaluator.
func (c TFConfig) Self() string {
	if addrs := c.Cluster[c.Task.Type]; c.Task.Index < len(addrs) {
		return addrs[c.Task.Index]
	}
	return ""
}

// deciderType is the type whose replica 0 decides when training is done, as the operator
// decides the job's success: master or chief when there is one, else worker.
func (c TFConfig) deciderType() string {
	for _, t := range []string{typeMaster, typeChief, typeWorker} {
		if len(c.Cluster[t]) > 0 {
			return t
		}
	}
	return ""
}

// IsDecider tells whether this replica evaluates and ends the training.
func (c TFConfig) IsDecider() bool {
	return c.Task.Type == c.deciderType() && c.Task.Index == 0
}

// peer is another replica the trainer talks to.
type peer struct{ name, addr string }

// peerList is peers for a log line: name=addr,...
func peerList(peers []peer) string {
	var s []string
	for _, p := range peers {
		s = append(s, p.name+"="+p.addr)
	}
	return strings.Join(s, ",")
}

// ParamServers lists where the parameter shards live: the ps tasks, or, in a cluster without
// any, the decider, which then holds the whole model itself (so a one-replica job trains).
func (c TFConfig) ParamServers() []peer {
	if ps := c.Cluster[typePS]; len(ps) > 0 {
		peers := make([]peer, len(ps))
		for i, a := range ps {
			peers[i] = peer{fmt.Sprintf("ps-%d", i), a}
		}
		return peers
	}
	t := c.deciderType()
	return []peer{{t + "-0", c.Cluster[t][0]}}
}

// HostsParams tells whether this trainer must serve the parameters itself: it is the decider
// of a cluster without ps.
func (c TFConfig) HostsParams() bool { return c.IsDecider() && len(c.Cluster[typePS]) == 0 }

// trainers names every replica that computes gradients.
func (c TFConfig) trainers() []string {
	var names []string
	for _, t := range []string{typeMaster, typeChief, typeWorker} {
		for i := range c.Cluster[t] {
			names = append(names, fmt.Sprintf("%s-%d", t, i))
		}
	}
	return names
}

// role says in words what this replica does, for the first log line.
func (c TFConfig) role() string {
	switch {
	case c.Task.Type == typePS:
		return "parameter-server"
	case c.Task.Type == typeEvaluator:
		return "evaluator"
	case c.HostsParams():
		return "decider+parameter-server"
	case c.IsDecider():
		return "decider"
	}
	return "worker"
}

// listenAddr is where a replica serves its address: every interface on its port, since a
// pod's DNS name points at the pod's IP; an IP literal (a local run) is listened on as is.
func listenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if net.ParseIP(host) != nil {
		return addr, nil
	}
	return ":" + port, nil
}
