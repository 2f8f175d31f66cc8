package checkpoint

import "github.com/kilnml/kiln/ir"

// Test hooks into the chain model.

// Chain is the chain model of a graph.
type Chain struct{ c *chain }

// ChainOf returns the chain model of g on at most maxBd boundaries.
func ChainOf(g *ir.Graph, maxBd int) *Chain {
	a := analyze(g)
	return &Chain{newChain(a, thin(a.cuts(), maxBd))}
}

// M returns the number of boundaries.
func (c *Chain) M() int { return c.c.m }

// Segmentation is a choice of kept boundaries and segment modes (0 keep, 1 recompute).
type Segmentation struct{ Kept, Modes []int }

// Solve runs the DP at budget.
func (c *Chain) Solve(budget int64) (Segmentation, float64, bool) {
	sg, cost, ok := c.c.solve(budget)
	return Segmentation{sg.kept, sg.modes}, cost, ok
}

// ModelPeak returns the model's peak and cost of s.
func (c *Chain) ModelPeak(s Segmentation) (int64, float64) {
	return c.c.modelPeak(segmentation{s.Kept, s.Modes})
}

// Evenly returns the segmentation with k evenly spread boundaries.
func (c *Chain) Evenly(k int) Segmentation {
	sg := c.c.evenly(k)
	return Segmentation{sg.kept, sg.modes}
}

// SavedCuts returns the n of the √n rule.
func (c *Chain) SavedCuts() int { return c.c.savedCuts() }

// LeastPeak returns the least model peak and a segmentation reaching it.
func (c *Chain) LeastPeak() (int64, Segmentation) {
	p, sg := c.c.leastPeak()
	return p, Segmentation{sg.kept, sg.modes}
}

// Rewrite returns a copy of g rewritten with the segmentation's recomputation.
func (c *Chain) Rewrite(s Segmentation) (*ir.Graph, error) {
	rec := c.c.recomputed(segmentation{s.Kept, s.Modes})
	h := c.c.a.g.Clone()
	_, _, err := analyze(h).apply(rec)
	return h, err
}

// LivePeak returns the peak live bytes of g by this package's mirror of the
// planner's liveness.
func LivePeak(g *ir.Graph) int64 {
	_, p := analyze(g).profile()
	return p
}

// LowerBound returns the lower bound on the recompute FLOPs of any choice
// whose live bytes fit budget.
func LowerBound(g *ir.Graph, budget int64) float64 { return analyze(g).lowerBound(budget) }
