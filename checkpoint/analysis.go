package checkpoint

import (
	"github.com/kilnml/kiln/ir"
)

// Align is the planner's buffer alignment (planner.Align, which this
// package cannot import): every buffer's size counts rounded up to it.
const Align = 256

func alignUp(n int64) int64 { return (n + Align - 1) / Align * Align }

// analysis holds what the decisions need to know about a graph whose
// backward has been appended.
//
// The forward region is every value up to fwdEnd, the last value that an
// output depends on; a user after fwdEnd is a backward user (gradients,
// optimizer updates). An activation (a candidate for recomputation) is a
// computed forward value that depends on an input or a param (a graph with
// no inputs, such as a cellular automaton's rollout from a constant grid,
// has activations too), is an ancestor of an output and is not itself an
// output, gradient or update value; it is saved when a backward user reads
// it.
type analysis struct {
	g      *ir.Graph
	n      int
	fwdEnd int // -1 when the graph has no output
	users  [][]ir.ID

	pinned []bool // read by an output, gradient or update: never recomputed
	dep    []bool // depends on an input or a param
	cand   []bool // activations
	saved  []bool // activations with a backward user

	lastFwd  []int // last forward user, or the value itself
	firstBwd []int // first backward user, -1 if none
	lastBwd  []int // last backward user, -1 if none

	size  []int64   // bytes, rounded up to Align
	flops []float64 // the cost model of each value

	// The planner's liveness (see liveness).
	lastPos int    // the last step position
	always  []bool // inputs, params and state: live throughout
	end     []int  // last live position of each computed value
	isStep  []bool // positions that are steps of the plan
}

func analyze(g *ir.Graph) *analysis {
	n := len(g.Values)
	a := &analysis{g: g, n: n, fwdEnd: -1, users: g.Users()}
	anc := make([]bool, n)
	for _, o := range g.Outputs {
		anc[o] = true
	}
	for i := n - 1; i >= 0; i-- {
		if anc[i] {
			if a.fwdEnd < 0 {
				a.fwdEnd = i
			}
			for _, x := range g.Values[i].Args {
				anc[x] = true
			}
		}
	}
	a.pinned = g.RootMask()
	dep := make([]bool, n)
	a.dep = dep
	a.cand = make([]bool, n)
	a.saved = make([]bool, n)
	a.lastFwd = make([]int, n)
	a.firstBwd = make([]int, n)
	a.lastBwd = make([]int, n)
	a.size = make([]int64, n)
	a.flops = make([]float64, n)
	for i := range g.Values {
		v := &g.Values[i]
		a.size[i] = alignUp(int64(v.Type.Bytes()))
		a.flops[i] = FLOPs(g, ir.ID(i))
		dep[i] = v.Op == ir.OpInput || v.Op == ir.OpParam
		for _, x := range v.Args {
			dep[i] = dep[i] || dep[x]
		}
		a.lastFwd[i], a.firstBwd[i], a.lastBwd[i] = i, -1, -1
		for _, u := range a.users[i] {
			if int(u) <= a.fwdEnd {
				a.lastFwd[i] = max(a.lastFwd[i], int(u))
			} else {
				if a.firstBwd[i] < 0 {
					a.firstBwd[i] = int(u)
				}
				a.lastBwd[i] = max(a.lastBwd[i], int(u))
			}
		}
		a.cand[i] = i <= a.fwdEnd && anc[i] && dep[i] && !v.Op.IsLeaf() && !a.pinned[i]
		a.saved[i] = a.cand[i] && a.firstBwd[i] >= 0
	}
	a.liveness()
	return a
}

// recomputable reports whether value id may be recomputed at all (a manual
// mark): a computed forward value that no output, gradient or update reads.
func (a *analysis) recomputable(id int) bool {
	return id <= a.fwdEnd && !a.g.Values[id].Op.IsLeaf() && !a.pinned[id]
}

// liveness mirrors the planner's: computed values are the steps, in value
// order; each update's copy runs right after its new value is computed and
// its target last read (planner.withCopies), where the new value dies; a
// computed buffer is live from its step to its last reader; outputs (and
// gradients, unless the graph is a training step) live to the last step; inputs, params and state live
// throughout. (A copy step holds no more bytes than the step it follows, so
// only the kernel steps set the peak.)
func (a *analysis) liveness() {
	g := a.g
	a.always = make([]bool, a.n)
	a.end = make([]int, a.n)
	a.isStep = make([]bool, a.n+1)
	a.lastPos = -1
	for i, v := range g.Values {
		if v.Op.IsLeaf() {
			a.always[i] = true
			continue
		}
		a.isStep[i] = true
		a.lastPos = i
	}
	for i := range g.Values {
		a.end[i] = i
		if len(a.users[i]) > 0 {
			a.end[i] = int(a.users[i][len(a.users[i])-1])
		}
	}
	for _, o := range g.Outputs {
		a.end[o] = a.lastPos
	}
	if !g.UpdatesParams() { // a training step's gradients are not kept (planner.build)
		for _, gp := range g.Grads {
			a.end[gp.Grad] = a.lastPos
		}
	}
	for _, u := range g.Updates {
		if u.Value == u.Target {
			continue
		}
		at := int(u.Value)
		if len(a.users[u.Target]) > 0 {
			at = max(at, int(a.users[u.Target][len(a.users[u.Target])-1]))
		}
		a.end[u.Value] = max(a.end[u.Value], at)
	}
}

// profile returns the bytes live at every position 0..n (only steps
// matter) and the peak over the steps, which is the planner's lower bound.
func (a *analysis) profile() ([]int64, int64) {
	diff := make([]int64, a.n+2)
	var fixed int64
	for i := range a.g.Values {
		if a.always[i] {
			fixed += a.size[i]
			continue
		}
		diff[i] += a.size[i]
		diff[a.end[i]+1] -= a.size[i]
	}
	live := make([]int64, a.n+1)
	var cur, peak int64
	for p := 0; p <= a.n; p++ {
		cur += diff[p]
		live[p] = fixed + cur
		if a.isStep[p] {
			peak = max(peak, live[p])
		}
	}
	return live, peak
}

// activationPeak returns the most bytes of activations (and their clones,
// named NAME.remat) live at any step.
func (a *analysis) activationPeak(isAct []bool) int64 {
	diff := make([]int64, a.n+2)
	for i := range a.g.Values {
		if isAct[i] && !a.always[i] {
			diff[i] += a.size[i]
			diff[a.end[i]+1] -= a.size[i]
		}
	}
	var cur, peak int64
	for p := 0; p <= a.n; p++ {
		cur += diff[p]
		if a.isStep[p] {
			peak = max(peak, cur)
		}
	}
	return peak
}
