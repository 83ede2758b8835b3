// Package core is empty: Kueue's TrainJob integration, which mlkube never builds, imports it,
// and go mod tidy looks for every package a dependency's tests could reach.
package core
