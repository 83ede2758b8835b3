package main

// The model is linear regression, y = w·x + b, trained on an endless stream of synthetic
// examples around fixed true weights. It is small on purpose: its loss tells at a glance whether
// the distributed machinery works. From zero weights the mean squared error starts near 10 and,
// when gradients flow, falls in a few dozen steps to the noise floor noiseStd² = 0.0025, under
// the default --loss-threshold of 0.01; when they do not flow, it stays put.

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
)

// Features is the number of inputs; the parameters are the weights, then the bias.
const (
	Features  = 8
	NumParams = Features + 1
)

var trueWeights = [Features]float64{0.5, -1.2, 2.0, 0.3, -0.7, 1.5, -0.4, 0.9}

const (
	trueBias = 0.25
	noiseStd = 0.05
	// The held-out set is the same for every replica and every run, so losses compare.
	evalSize = 1024
	evalSeed = 0xe7a1
)

// Batch is a set of examples.
type Batch struct {
	X [][Features]float64
	Y []float64
}

// Synthetic draws n examples: standard normal inputs, targets from the true weights plus noise.
func Synthetic(rng *rand.Rand, n int) Batch {
	b := Batch{X: make([][Features]float64, n), Y: make([]float64, n)}
	for i := range n {
		y := trueBias
		for j := range Features {
			b.X[i][j] = rng.NormFloat64()
			y += trueWeights[j] * b.X[i][j]
		}
		b.Y[i] = y + noiseStd*rng.NormFloat64()
	}
	return b
}

// EvalSet is the held-out set every evaluating replica uses.
func EvalSet() Batch { return Synthetic(newRand(evalSeed), evalSize) }

// dataSeed gives each replica its own, reproducible data stream: a restarted worker sees the
// same batches again, two workers never the same ones.
func dataSeed(replica string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(replica))
	return h.Sum64()
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6d6c6b756265)) }

func predict(params []float64, x *[Features]float64) float64 {
	p := params[Features]
	for j := range Features {
		p += params[j] * x[j]
	}
	return p
}

// Loss is the mean squared error of params on b.
func Loss(params []float64, b Batch) float64 {
	var sum float64
	for i := range b.X {
		d := predict(params, &b.X[i]) - b.Y[i]
		sum += d * d
	}
	return sum / float64(len(b.X))
}

// Gradient is the loss of params on b and its gradient: d/dw_j = 2/n Σ (ŷ-y) x_j, d/db = 2/n Σ (ŷ-y).
func Gradient(params []float64, b Batch) (float64, []float64) {
	grad := make([]float64, NumParams)
	var sum float64
	for i := range b.X {
		d := predict(params, &b.X[i]) - b.Y[i]
		sum += d * d
		for j := range Features {
			grad[j] += 2 * d * b.X[i][j]
		}
		grad[Features] += 2 * d
	}
	n := float64(len(b.X))
	for j := range grad {
		grad[j] /= n
	}
	return sum / n, grad
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
