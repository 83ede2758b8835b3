package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// PyTorch mode: the replicas of a PyTorchJob. Every replica is told the master's address
// (MASTER_ADDR, MASTER_PORT), the world size and its rank, as torch.distributed's env://
// rendezvous reads them; the master is rank 0 and serves the allreduce (allreduce.go).

// The variables a PyTorchJob operator sets on every replica, as torch.distributed's env://
// rendezvous reads them, and torchrun's PET_* spellings of the same (Kubeflow's training
// operator sets both sets).
const (
	envMasterAddr      = "MASTER_ADDR"
	envMasterPort      = "MASTER_PORT"
	envWorldSize       = "WORLD_SIZE"
	envRank            = "RANK"
	envPETMasterAddr   = "PET_MASTER_ADDR"
	envPETMasterPort   = "PET_MASTER_PORT"
	envPETNNodes       = "PET_NNODES"
	envPETNodeRank     = "PET_NODE_RANK"
	envPETNProcPerNode = "PET_NPROC_PER_NODE"
)

// pytorchVar is one setting and its two spellings; the plain one wins when both are set.
type pytorchVar struct{ plain, pet, example string }

var (
	varMasterAddr = pytorchVar{envMasterAddr, envPETMasterAddr, "127.0.0.1"}
	varMasterPort = pytorchVar{envMasterPort, envPETMasterPort, "23456"}
	varWorldSize  = pytorchVar{envWorldSize, envPETNNodes, "1"}
	varRank       = pytorchVar{envRank, envPETNodeRank, "0"}
	pytorchVars   = []pytorchVar{varMasterAddr, varMasterPort, varWorldSize, varRank}
)

// lookup is the variable v is read from and its value: the plain one when set, else the PET_ one.
func (v pytorchVar) lookup(env func(string) string) (name, value string) {
	if s := env(v.plain); s != "" {
		return v.plain, s
	}
	return v.pet, env(v.pet)
}

func (v pytorchVar) missing() error {
	return fmt.Errorf("%s (or torchrun's %s) is not set: the PyTorchJob operator sets it on every replica (e.g. %s=%s to run by hand)",
		v.plain, v.pet, v.plain, v.example)
}

// PyTorchConfig is what a PyTorchJob replica is told: where the master is, how many ranks there
// are, and which one this is.
type PyTorchConfig struct {
	MasterAddr string // the master's host
	MasterPort int
	WorldSize  int // the master and the workers
	Rank       int // 0: the master; workers 1 to WorldSize-1
	Vars       []string
}

// Master is the master's address.
func (c PyTorchConfig) Master() string {
	return net.JoinHostPort(c.MasterAddr, strconv.Itoa(c.MasterPort))
}

// Name is how logs name this replica: master-0, or worker-i for rank i+1, as the operator names
// the pods (a PyTorchJob's worker i has rank i+1).
func (c PyTorchConfig) Name() string { return rankName(c.Rank) }

// RunPyTorch runs one replica of a PyTorchJob until it is done and returns its exit code. The
// context ending is SIGTERM: exit 143.
func RunPyTorch(ctx context.Context, cfg PyTorchConfig, o Options) int {
	log, ok := begin(&o, cfg.Name(), "pytorch rank=%d world_size=%d master=%s from=%s sync_every=%d hostname=%s",
		cfg.Rank, cfg.WorldSize, cfg.Master(), strings.Join(cfg.Vars, ","), o.SyncEvery, o.Hostname)
	if !ok {
		return exitUsage
	}
	return runRank(ctx, world{size: cfg.WorldSize, rank: cfg.Rank, addr: cfg.Master(), sizeVar: cfg.Vars[2], portVar: cfg.Vars[1],
		rank0: "the master", name: rankName}, o, log)
}

func rankName(rank int) string {
	if rank == 0 {
		return typeMaster + "-0"
	}
	return fmt.Sprintf("%s-%d", typeWorker, rank-1)
}

// usePyTorch tells whether the trainer runs in PyTorch mode: neither TF_CONFIG (nor
// --tf-config) nor DMLC_ROLE, and any of the PyTorch variables set. A replica with only some of
// them is a PyTorchJob's that lacks the others, and loadPyTorchConfig says which.
func usePyTorch(tfConfigFlag string, getenv func(string) string) bool {
	if !noTFConfig(tfConfigFlag, getenv) || useDMLC(tfConfigFlag, getenv) {
		return false
	}
	for _, v := range pytorchVars {
		if strings.TrimSpace(getenv(v.plain)) != "" || strings.TrimSpace(getenv(v.pet)) != "" {
			return true
		}
	}
	return false
}

// loadPyTorchConfig reads and checks MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK, or their
// PET_* spellings, and PET_NPROC_PER_NODE.
func loadPyTorchConfig(getenv func(string) string) (PyTorchConfig, error) {
	env := func(name string) string { return strings.TrimSpace(getenv(name)) }
	var c PyTorchConfig
	number := func(v pytorchVar, min int) (int, error) {
		name, raw := v.lookup(env)
		c.Vars = append(c.Vars, name)
		if raw == "" {
			return 0, v.missing()
		}
		n, err := envInt(name, raw, min)
		if err != nil && strings.Contains(raw, ":") {
			err = fmt.Errorf("%w (an elastic min:max range is not supported: the trainer needs a fixed world size)", err)
		}
		return n, err
	}

	name, addr := varMasterAddr.lookup(env)
	c.Vars = append(c.Vars, name)
	if addr == "" {
		return c, varMasterAddr.missing()
	}
	var err error
	if c.MasterAddr, err = hostOf(name, addr, "the master's", varMasterPort.plain); err != nil {
		return c, err
	}
	if c.MasterPort, err = number(varMasterPort, 1); err == nil {
		err = checkPort(c.Vars[1], c.MasterPort)
	}
	if err != nil {
		return c, err
	}
	if c.WorldSize, err = number(varWorldSize, 1); err != nil {
		return c, err
	}
	if c.Rank, err = number(varRank, 0); err != nil {
		return c, err
	}
	if err := checkRank(c.Vars[3], c.Rank, c.Vars[2], c.WorldSize, "the master is rank 0 and the workers"); err != nil {
		return c, err
	}
	switch nproc := env(envPETNProcPerNode); nproc {
	case "", "1", "auto", "cpu":
	default:
		return c, fmt.Errorf("%s=%q: the trainer is one process per pod, so it must be 1 (the PyTorchJob's nprocPerNode)", envPETNProcPerNode, nproc)
	}
	return c, nil
}

// hostOf is rank 0's host from raw, the value of variable name: a host name or IP address (an
// IPv6 one in brackets or not) with no port, which goes in portVar; whose says whose host it is.
func hostOf(name, raw, whose, portVar string) (string, error) {
	switch _, _, err := net.SplitHostPort(raw); {
	case strings.ContainsAny(raw, " \t/"):
		return "", fmt.Errorf("%s=%q is not a host name or IP address", name, raw)
	case err == nil:
		return "", fmt.Errorf("%s=%q has a port: it is %s host, and the port goes in %s", name, raw, whose, portVar)
	}
	return strings.TrimSuffix(strings.TrimPrefix(raw, "["), "]"), nil
}

// checkPort refuses port, the value of variable name, past 65535 (envInt saw it is at least 1).
func checkPort(name string, port int) error {
	if port > 65535 {
		return fmt.Errorf("%s=%d is not a port (1-65535)", name, port)
	}
	return nil
}

// checkRank refuses rank, the value of variable rankVar, unless it is under size, sizeVar's;
// ranks says which is rank 0 and who the others are.
func checkRank(rankVar string, rank int, sizeVar string, size int, ranks string) error {
	if rank >= size {
		return fmt.Errorf("%s=%d is not under %s=%d: %s 1 to %d", rankVar, rank, sizeVar, size, ranks, size-1)
	}
	return nil
}

// envInt parses the integer variable name, which must be at least min.
func envInt(name, raw string, min int) (int, error) {
	n, err := strconv.Atoi(raw)
	if err != nil || n < min {
		return 0, fmt.Errorf("%s=%q is not an integer of at least %d", name, raw, min)
	}
	return n, nil
}
