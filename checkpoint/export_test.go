package checkpoint

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
)

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

// Segmentation is a choice of kept boundaries and segment modes (0 keep,
// 1 recompute, 2 multi-level with the tree in Trees).
type Segmentation struct {
	Kept, Modes []int
	Trees       []*Tree
}

// Tree is a multi-level schedule: nil is a leaf, else a split at boundary
// K with the trees above (Right) and below (Left) it.
type Tree struct {
	K           int
	Right, Left *Tree
}

func (t *Tree) String() string {
	if t == nil {
		return "."
	}
	return fmt.Sprintf("(%v %d %v)", t.Left, t.K, t.Right)
}

func toTree(t *Tree) *tree {
	if t == nil {
		return nil
	}
	return &tree{t.K, toTree(t.Right), toTree(t.Left)}
}

func fromTree(t *tree) *Tree {
	if t == nil {
		return nil
	}
	return &Tree{t.k, fromTree(t.right), fromTree(t.left)}
}

func (s Segmentation) in() segmentation {
	sg := segmentation{kept: s.Kept, modes: s.Modes}
	for _, t := range s.Trees {
		sg.trees = append(sg.trees, toTree(t))
	}
	return sg
}

func out(sg segmentation) Segmentation {
	s := Segmentation{Kept: sg.kept, Modes: sg.modes}
	for _, t := range sg.trees {
		s.Trees = append(s.Trees, fromTree(t))
	}
	return s
}

// Solve runs the one-level DP at budget.
func (c *Chain) Solve(budget int64) (Segmentation, float64, bool) {
	sg, cost, ok := c.c.solve(budget, false)
	return out(sg), cost, ok
}

// SolveMulti runs the DP with multi-level segments at budget.
func (c *Chain) SolveMulti(budget int64) (Segmentation, float64, bool) {
	sg, cost, ok := c.c.solve(budget, true)
	return out(sg), cost, ok
}

// Nodes returns the multi-level nodes (boundary indices, 0 and M()+1
// included) and whether the tree fronts are exact.
func (c *Chain) Nodes() ([]int, bool) {
	mm := c.c.buildMulti()
	return mm.nodes, mm.exact
}

// ModelPeak returns the model's peak and cost of s.
func (c *Chain) ModelPeak(s Segmentation) (int64, float64) {
	return c.c.modelPeak(s.in())
}

// Evenly returns the segmentation with k evenly spread boundaries.
func (c *Chain) Evenly(k int) Segmentation {
	return out(c.c.evenly(k))
}

// SavedCuts returns the n of the √n rule.
func (c *Chain) SavedCuts() int { return c.c.savedCuts() }

// LeastPeak returns the least model peak and a segmentation reaching it
// (one-level, or with multi-level segments).
func (c *Chain) LeastPeak(multi bool) (int64, Segmentation) {
	p, sg := c.c.leastPeak(multi)
	return p, out(sg)
}

// Rewrite returns a copy of g rewritten with the segmentation's recomputation.
func (c *Chain) Rewrite(s Segmentation) (*ir.Graph, error) {
	h, _, _, err := c.RewriteCost(s)
	return h, err
}

// RewriteCost is Rewrite that also returns the clones' FLOPs and the most
// clones of one value.
func (c *Chain) RewriteCost(s Segmentation) (*ir.Graph, float64, int, error) {
	h := c.c.a.g.Clone()
	r, err := analyze(h).applySchedule(c.c.schedule(s.in()))
	return h, r.cost, r.levels, err
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

// Candidates returns g's activations: the values a budget may recompute.
func Candidates(g *ir.Graph) []ir.ID {
	a := analyze(g)
	var out []ir.ID
	for i, c := range a.cand {
		if c {
			out = append(out, ir.ID(i))
		}
	}
	return out
}

// Sweep is one recomputation pass (see sweep).
type Sweep struct {
	Vals       []int
	Lo, Hi, At int
}

// RewriteSweeps returns a copy of g rewritten to run the sweeps, and the
// clones' FLOPs.
func RewriteSweeps(g *ir.Graph, sws []Sweep) (*ir.Graph, float64, error) {
	var s schedule
	for _, sw := range sws {
		s.sweeps = append(s.sweeps, sweep{vals: sw.Vals, lo: sw.Lo, hi: sw.Hi, at: sw.At})
	}
	h := g.Clone()
	r, err := analyze(h).applySchedule(s)
	return h, r.cost, err
}

// ForwardEnd returns the last forward value's id.
func ForwardEnd(g *ir.Graph) int { return analyze(g).fwdEnd }
