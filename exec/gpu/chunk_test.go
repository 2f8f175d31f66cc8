package gpu_test

import (
	"math/rand/v2"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// TestChunkedArenaMatchesCPU trains the digits MLP (Adam) from a plan
// whose arena is placed in chunks no larger than its largest buffer, so
// that the GPU binds it as several storage buffers: the losses, params
// and Adam state after three steps equal the CPU's within gradTol.
func TestChunkedArenaMatchesCPU(t *testing.T) {
	needGPU(t)
	opt := passes.OptimizerConfig{Kind: "adam", LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	whole := compile(t, examples.DigitsMLP, kiln.Options{Optimizer: &opt})
	var largest int64
	for _, b := range whole.Buffers {
		largest = max(largest, (b.Size+planner.Align-1)/planner.Align*planner.Align)
	}
	p := compile(t, examples.DigitsMLP, kiln.Options{Optimizer: &opt, Plan: planner.Options{ChunkBytes: largest}})
	c, g := executors(t, p)
	if g.Chunks() < 3 || int64(g.Chunks()) != p.Chunks() {
		t.Fatalf("arena of %d bytes in %d storage buffers (plan: %d chunks of %d bytes), want several", p.ArenaBytes, g.Chunks(), p.Chunks(), p.ChunkBytes)
	}
	trainMatches(t, p, c, g, rand.New(rand.NewPCG(7, 8)), 10, 3)
	t.Logf("arena %d bytes in %d chunks of %d (unchunked arena %d, lower bound %d, ratio %.3f)", p.ArenaBytes, p.Chunks(), p.ChunkBytes, whole.ArenaBytes, p.LowerBound, p.Ratio())
}

// TestCompileForGPU: kiln.ChunkBytes("gpu") is the device's binding size,
// and a plan compiled with it is placed in chunks of it.
func TestCompileForGPU(t *testing.T) {
	needGPU(t)
	want, err := gpu.ChunkBytes()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kiln.ChunkBytes("gpu")
	if err != nil || c != want {
		t.Fatalf("kiln.ChunkBytes(\"gpu\") = %d, %v; want the device's %d", c, err, want)
	}
	p := compile(t, examples.DigitsMLP, kiln.Options{Grad: true, Plan: planner.Options{ChunkBytes: c}})
	if p.ChunkBytes != want {
		t.Errorf("ChunkBytes %d, want the device's %d", p.ChunkBytes, want)
	}
}
