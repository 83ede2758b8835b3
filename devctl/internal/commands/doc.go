// Package commands holds what devctl's commands do, one file each (up, down, status);
// cmd/devctl wires them to flags. Status lines go to one writer (stderr), results to another
// (stdout); errors are returned for main to print once.
package commands
