package frontends

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
)

// Checkpoint runs region and marks every value it computes, except the
// one it returns, to be recomputed in the backward pass instead of kept
// from the forward pass (the graph's recompute marks; see package
// checkpoint). The returned value is the region's output and stays kept, so
// the backward recomputes the region from it and from the region's inputs,
// like torch.utils.checkpoint. Params declared inside are not marks: they
// persist anyway.
func (b *Builder) Checkpoint(region func() Value) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	start := ir.ID(len(b.g.Values))
	out := region()
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	if out.b != b {
		return b.fail(1, fmt.Errorf("checkpoint: the region returned a value of another builder"))
	}
	var marks []ir.ID
	for id := start; int(id) < len(b.g.Values); id++ {
		if id != out.id && !b.g.Values[id].Op.IsLeaf() {
			marks = append(marks, id)
		}
	}
	b.g.MarkRecompute(marks...)
	return out
}

// CheckpointSequential applies layers to x in order, split into k segments
// of consecutive layers as evenly as possible, like PyTorch's
// checkpoint_sequential: each segment but the last is a Checkpoint region,
// so only the segments' outputs are kept and the backward recomputes the
// rest of a segment from its input; the last segment runs as usual. It
// returns the last layer's output. k is clamped to 1..len(layers).
func (b *Builder) CheckpointSequential(x Value, k int, layers ...func(Value) Value) Value {
	n := len(layers)
	if n == 0 {
		return x
	}
	k = max(1, min(k, n))
	h := x
	for s := 0; s < k; s++ {
		lo, hi := s*n/k, (s+1)*n/k
		run := func() Value {
			for _, f := range layers[lo:hi] {
				h = f(h)
			}
			return h
		}
		if s < k-1 {
			h = b.Checkpoint(run)
		} else {
			h = run()
		}
	}
	return h
}
