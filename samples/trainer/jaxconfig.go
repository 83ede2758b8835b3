package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// JAX mode: the replicas of a JAXJob. Every replica is one JAX process, told where the
// coordinator is (COORDINATOR_ADDRESS, COORDINATOR_PORT), how many processes there are
// (NUM_PROCESSES) and which one it is (PROCESS_ID), the variables Kubeflow's JAXJob sets. A JAX
// program passes them to jax.distributed.initialize: coordinator_address is
// COORDINATOR_ADDRESS:COORDINATOR_PORT (JAX takes host and port as one string), num_processes
// is NUM_PROCESSES and process_id is PROCESS_ID. The trainer rendezvouses as initialize does:
// process 0, worker 0, serves the coordination on COORDINATOR_PORT; every process registers
// with it under its PROCESS_ID and waits until all NUM_PROCESSES have (initialize's
// initialization_timeout is --peer-timeout). The training is then the PyTorch mode's, process
// 0 averaging the parameters (allreduce.go), and process 0's evaluation ends it.
const (
	envCoordinatorAddress = "COORDINATOR_ADDRESS"
	envCoordinatorPort    = "COORDINATOR_PORT"
	envNumProcesses       = "NUM_PROCESSES"
	envProcessID          = "PROCESS_ID"
)

// jaxVars are the JAX mode's variables, each with a value to run by hand.
var jaxVars = []struct{ name, example string }{
	{envCoordinatorAddress, "127.0.0.1"}, {envCoordinatorPort, "6666"}, {envNumProcesses, "1"}, {envProcessID, "0"},
}

// JAXConfig is what a JAXJob replica is told: where the coordinator is, how many processes there
// are, and which one this is.
type JAXConfig struct {
	CoordinatorAddress string // the coordinator's host
	CoordinatorPort    int
	NumProcesses       int
	ProcessID          int // 0: the coordinator, worker 0
}

// Coordinator is the coordinator's address, as jax.distributed.initialize's coordinator_address.
func (c JAXConfig) Coordinator() string {
	return net.JoinHostPort(c.CoordinatorAddress, strconv.Itoa(c.CoordinatorPort))
}

// Name is how logs name this replica: worker-i for process i, as the operator names the pods.
func (c JAXConfig) Name() string { return processName(c.ProcessID) }

func processName(id int) string { return fmt.Sprintf("%s-%d", typeWorker, id) }

// RunJAX runs one replica of a JAXJob until it is done and returns its exit code. The context
// ending is SIGTERM: exit 143.
func RunJAX(ctx context.Context, cfg JAXConfig, o Options) int {
	log, ok := begin(&o, cfg.Name(), "jax process_id=%d num_processes=%d coordinator=%s sync_every=%d hostname=%s",
		cfg.ProcessID, cfg.NumProcesses, cfg.Coordinator(), o.SyncEvery, o.Hostname)
	if !ok {
		return exitUsage
	}
	return runRank(ctx, world{size: cfg.NumProcesses, rank: cfg.ProcessID, addr: cfg.Coordinator(), sizeVar: envNumProcesses,
		portVar: envCoordinatorPort, rank0: "the coordinator", name: processName, barrier: true}, o, log)
}

// useJAX tells whether the trainer runs in JAX mode: none of the other modes' variables set
// (TF_CONFIG or --tf-config, DMLC_ROLE, the PyTorch ones), and any of the JAX ones. A replica
// with only some of them is a JAXJob's that lacks the others, and loadJAXConfig says which.
func useJAX(tfConfigFlag string, getenv func(string) string) bool {
	if !noTFConfig(tfConfigFlag, getenv) || useDMLC(tfConfigFlag, getenv) || usePyTorch(tfConfigFlag, getenv) {
		return false
	}
	for _, v := range jaxVars {
		if strings.TrimSpace(getenv(v.name)) != "" {
			return true
		}
	}
	return false
}

// loadJAXConfig reads and checks COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES and
// PROCESS_ID.
func loadJAXConfig(getenv func(string) string) (JAXConfig, error) {
	raw := map[string]string{}
	for _, v := range jaxVars {
		if raw[v.name] = strings.TrimSpace(getenv(v.name)); raw[v.name] == "" {
			return JAXConfig{}, fmt.Errorf("%s is not set: the JAXJob operator sets it on every replica (e.g. %s=%s to run by hand)", v.name, v.name, v.example)
		}
	}
	var c JAXConfig
	var err error
	if c.CoordinatorAddress, err = hostOf(envCoordinatorAddress, raw[envCoordinatorAddress], "the coordinator's", envCoordinatorPort); err != nil {
		return c, err
	}
	if c.CoordinatorPort, err = envInt(envCoordinatorPort, raw[envCoordinatorPort], 1); err == nil {
		err = checkPort(envCoordinatorPort, c.CoordinatorPort)
	}
	if err != nil {
		return c, err
	}
	if c.NumProcesses, err = envInt(envNumProcesses, raw[envNumProcesses], 1); err != nil {
		return c, err
	}
	if c.ProcessID, err = envInt(envProcessID, raw[envProcessID], 0); err != nil {
		return c, err
	}
	return c, checkRank(envProcessID, c.ProcessID, envNumProcesses, c.NumProcesses, "the coordinator is process 0 and the others")
}
