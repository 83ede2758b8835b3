// Package chaos breaks the operator's world while jobs run, and checks that nothing was lost or
// done twice: the operator process SIGKILLed and restarted every few seconds, the apiserver
// restarted under it, the leader killed while a follower waits. It holds tests only: `make chaos`
// runs them at full size, `make test` runs short forms.
//
// The operator runs as its real binary in its own processes, against the real apiserver and
// etcd the other suites use. There is no kubelet: a simulated one (kubelet_test.go) writes the
// pod statuses a real one would, and plans every job's exits up front (success, a retryable exit
// that must be restarted, a permanent one), so that the end state of every job and its exact
// restart count are known before the first kill.
package chaos
