package checkpoint

import "github.com/kilnml/kiln/ir"

// Test hooks into the chain model.

type Chain struct{ c *chain }

// ChainOf returns the chain model of g on at most maxBd boundaries.
func ChainOf(g *ir.Graph, maxBd int) *Chain {
	a := analyze(g)
	return &Chain{newChain(a, thin(a.cuts(), maxBd))}
}

func (c *Chain) M() int { return c.c.m }

// Segmentation is a choice of kept boundaries and segment modes (0 keep, 1 recompute).
type Segmentation struct{ Kept, Modes []int }

func (c *Chain) Solve(budget int64) (Segmentation, float64, bool) {
	sg, cost, ok := c.c.solve(budget)
	return Segmentation{sg.kept, sg.modes}, cost, ok
}

func (c *Chain) ModelPeak(s Segmentation) (int64, float64) {
	return c.c.modelPeak(segmentation{s.Kept, s.Modes})
}

func (c *Chain) Evenly(k int) Segmentation {
	sg := c.c.evenly(k)
	return Segmentation{sg.kept, sg.modes}
}

func (c *Chain) SavedCuts() int { return c.c.savedCuts() }

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
