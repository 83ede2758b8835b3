package replicajob

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/mlkube/mlkube/operator/api/v1beta1"
	"github.com/mlkube/mlkube/operator/crdvalidate"
)

// Calls go one way: the engine checks a job once, before it builds any pod, and hands its
// framework a Cluster, every replica's address resolved. A framework turns that into env and
// never calls back into the engine.
//
// The check is the job's own CRD (operator/crdvalidate runs its schema and CEL rules in
// process), so the rules are stated once, in the API types. The apiserver already refused what
// breaks them at create; this catches a job stored before a rule existed, which would otherwise
// start with a wrong cluster.

// Cluster is a checked job as a framework sees it: its replica groups with defaults applied,
// and where each replica is.
//
// Every replica is found through the job's one headless service (services.go): its pod has
// hostname <job>-<type>-<index> and that service as its subdomain, so its address is
// <job>-<type>-<index>.<job>.<namespace>.svc. A job an older operator started has a service
// per replica instead, and keeps it until it ends (ServicePerReplica).
type Cluster struct {
	Groups []Group
	// ServicePerReplica is the older layout: replica i at <job>-<type>-<i>.<namespace>.svc.
	ServicePerReplica bool
}

// Group is one replica group and the address of each of its replicas.
type Group struct {
	Replica
	// Hosts[i] is the DNS name of replica i, without a port.
	Hosts []string
}

// Addr is replica i's host:port.
func (g Group) Addr(i int) string { return net.JoinHostPort(g.Hosts[i], strconv.Itoa(int(g.Port))) }

// Group is the group of type typ; ok is false when the job has none.
func (c Cluster) Group(typ string) (g Group, ok bool) {
	for _, g := range c.Groups {
		if g.Type == typ {
			return g, true
		}
	}
	return Group{}, false
}

// Size is how many replicas the job has in all.
func (c Cluster) Size() int {
	n := 0
	for _, g := range c.Groups {
		n += int(g.Replicas)
	}
	return n
}

// Resolve checks job against its CRD and returns its cluster. The error names every field the
// CRD refuses, as the apiserver would have, or the variable of fw's env that no container could
// start with, and says what to do.
func Resolve(fw Framework, job v1beta1.Job) (Cluster, error) {
	if errs := crdvalidate.Validate(job); len(errs) > 0 {
		lines := make([]string, len(errs))
		for i, e := range errs {
			lines[i] = crdvalidate.Line(e)
		}
		return Cluster{}, fmt.Errorf("the job breaks its CRD's rules (it was stored before they existed): %s; delete it and create it again, fixed",
			strings.Join(lines, "; "))
	}
	return resolveChecked(fw, job)
}

// resolveChecked is Resolve for a job known to keep its CRD's rules.
func resolveChecked(fw Framework, job v1beta1.Job) (Cluster, error) {
	c := ClusterOf(job.GetNamespace(), job.GetName(), job.Groups()...)
	return c, checkEnv(fw, c)
}

// ClusterOf is the cluster of job ns/name with these groups, unchecked: each replica at its
// name in the job's service.
func ClusterOf(ns, name string, groups ...Replica) Cluster {
	return clusterOf(ns, name, false, groups...)
}

func clusterOf(ns, name string, perReplica bool, groups ...Replica) Cluster {
	domain := "." + JobServiceName(name) + "." + ns + ".svc"
	if perReplica {
		domain = "." + ns + ".svc"
	}
	c := Cluster{ServicePerReplica: perReplica}
	for _, r := range groups {
		g := Group{Replica: r, Hosts: make([]string, max(r.Replicas, 0))}
		for i := range g.Hosts {
			g.Hosts[i] = ReplicaName(name, r.Type, i) + domain
		}
		c.Groups = append(c.Groups, g)
	}
	return c
}

// maxEnvString is the most bytes Linux takes for one NAME=value string of a new process's
// environment, NUL included (MAX_ARG_STRLEN: 32 pages of 4 KiB). A container given a longer
// variable cannot start at all ("argument list too long").
const maxEnvString = 32 * 4096

// checkEnv says whether the framework's env fits the kernel, for every replica of c. A
// variable grows with the replica's index, if at all (the digits of an index, a rank), so the
// last replica of each group stands for the group.
func checkEnv(fw Framework, c Cluster) error {
	for _, g := range c.Groups {
		if g.Replicas < 1 {
			continue
		}
		for _, v := range fw.Env(c, g.Type, int(g.Replicas)-1) {
			if size := len(v.Name) + 1 + len(v.Value) + 1; size > maxEnvString {
				return fmt.Errorf("%s would be %d bytes, over the %d bytes Linux allows one environment variable, "+
					"so the container could not start: use fewer replicas, or a shorter job name or namespace", v.Name, size, maxEnvString)
			}
		}
	}
	return nil
}

// resolved is a job's cluster, or why it has none, as of one generation of its spec.
type resolved struct {
	generation int64
	cluster    Cluster
	err        error
}

// resolve is Resolve, done once per generation of a job's spec.
//
// What is remembered holds no pointer into the job it was resolved from: a group's Template
// points into the job read for that reconcile, a copy of the cache's, and would keep that whole
// copy alive for as long as the job lives (5 MB for a thousand jobs, half of the job cache
// again). The templates are taken from the job at hand instead, of the same generation.
//
// A job the apiserver has already checked against the operator's own CRD (Admitted) is not
// checked again: for a burst of new jobs, that check was a third of the operator's CPU.
func (e *Reconciler) resolve(ctx context.Context, job v1beta1.Job, mem *memory) (Cluster, error) {
	if r := mem.resolved; r != nil && r.generation == job.GetGeneration() {
		return withTemplates(r.cluster, job), r.err
	}
	resolve := Resolve
	if e.Admitted != nil && e.Admitted.Checked(ctx, job) {
		resolve = resolveChecked
	}
	c, err := resolve(e.Framework, job)
	mem.resolved = &resolved{generation: job.GetGeneration(), cluster: withTemplates(c, nil), err: err}
	return c, err
}

// withTemplates is c with each group's Template taken from job's group of the same index, or
// none when job is nil; c itself is not changed.
func withTemplates(c Cluster, job v1beta1.Job) Cluster {
	if len(c.Groups) == 0 {
		return c
	}
	var groups []Replica
	if job != nil {
		groups = job.Groups()
	}
	out := c
	out.Groups = make([]Group, len(c.Groups))
	for i, g := range c.Groups {
		g.Template = nil
		if i < len(groups) {
			g.Template = groups[i].Template
		}
		out.Groups[i] = g
	}
	return out
}

// withServicePerReplica is c in the older layout, for a job an older operator started.
func withServicePerReplica(c Cluster, job v1beta1.Job) Cluster {
	if c.ServicePerReplica {
		return c
	}
	var groups []Replica
	for _, g := range c.Groups {
		groups = append(groups, g.Replica)
	}
	return clusterOf(job.GetNamespace(), job.GetName(), true, groups...)
}
