package passes

import "github.com/kilnml/kiln/ir"

// Fuse replaces groups of ops by single fused ops that the executors run as
// one kernel: first the patterns with dedicated kernels (softmax backward,
// max and min backward, softmax with cross-entropy), then chains of
// elementwise ops, matmul epilogues and reduction prologues. Each fused op
// records the ops it replaced in its "from" attribute.
func Fuse(g *ir.Graph) error {
	if err := fusePatterns(g); err != nil {
		return err
	}
	return fuseElementwise(g)
}
