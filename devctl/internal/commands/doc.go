// Package commands holds what devctl's commands do, one file each (down, status, run, ...), but
// for `devctl up`, which is package up; cmd/devctl wires them to flags. Status lines go to one
// writer (stderr), results to another (stdout); errors are returned for main to print once.
package commands
