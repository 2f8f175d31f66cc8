package checkpoint_test

import (
	"github.com/kilnml/kiln/passes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kilnml/kiln/checkpoint"
)

// allTrees lists every tree of the subproblem (s,t) whose splits are at the
// given multi-level nodes: the leaf and every split at a node strictly
// between with every tree on each side.
func allTrees(nodes []int, s, t int) []*checkpoint.Tree {
	out := []*checkpoint.Tree{nil}
	for _, k := range nodes {
		if k <= s || k >= t {
			continue
		}
		for _, r := range allTrees(nodes, k, t) {
			for _, l := range allTrees(nodes, s, k) {
				out = append(out, &checkpoint.Tree{K: k, Right: r, Left: l})
			}
		}
	}
	return out
}

// allSchedules lists every schedule the DP with multi-level segments can
// choose on a chain with m boundaries: every subset of kept boundaries,
// every segment kept, recomputed once, or (between multi-level nodes)
// multi-level with every tree.
func allSchedules(m int, nodes []int) []checkpoint.Segmentation {
	isNode := map[int]bool{}
	for _, k := range nodes {
		isNode[k] = true
	}
	var out []checkpoint.Segmentation
	for mask := 0; mask < 1<<m; mask++ {
		var kept []int
		for i := range m {
			if mask&(1<<i) != 0 {
				kept = append(kept, i+1)
			}
		}
		bounds := append(append([]int{0}, kept...), m+1)
		type opt struct {
			mode int
			t    *checkpoint.Tree
		}
		var rec func(j int, modes []int, trees []*checkpoint.Tree)
		rec = func(j int, modes []int, trees []*checkpoint.Tree) {
			if j == len(bounds)-1 {
				out = append(out, checkpoint.Segmentation{Kept: kept, Modes: append([]int(nil), modes...), Trees: append([]*checkpoint.Tree(nil), trees...)})
				return
			}
			s, t := bounds[j], bounds[j+1]
			opts := []opt{{0, nil}, {1, nil}}
			if isNode[s] && isNode[t] {
				for _, tr := range allTrees(nodes, s, t) {
					opts = append(opts, opt{2, tr})
				}
			}
			for _, o := range opts {
				rec(j+1, append(modes, o.mode), append(trees, o.t))
			}
		}
		rec(0, nil, nil)
	}
	return out
}

// TestMultiModelExact checks the model against the rewrite on every
// schedule of small chains (multi-level segments with every tree
// included): the model's peak is the peak live bytes of the rewritten
// graph by this package's mirror of the planner's liveness, and the
// model's cost is the FLOPs of the clones the rewrite makes. On a sample
// of the multi-level schedules, the mirror's peak is also the lower bound
// of the planner's plan, and the plan passes its check.
func TestMultiModelExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range chainCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			c := checkpoint.ChainOf(tc.g, 6)
			nodes, _ := c.Nodes()
			bad := 0
			multi := 0
			planned := 0
			for _, sg := range allSchedules(c.M(), nodes) {
				model, cost := c.ModelPeak(sg)
				h, rcost, levels, err := c.RewriteCost(sg)
				if err != nil {
					t.Fatal(err)
				}
				if levels > 1 {
					multi++
				}
				passes.DCE(h)
				live := checkpoint.LivePeak(h)
				if levels > 1 && rng.IntN(100) == 0 {
					planned++
					if p := plan(t, h); p.LowerBound != live {
						t.Errorf("%v %v: the liveness mirror's peak %d, the plan's lower bound %d", sg, sg.Trees, live, p.LowerBound)
					}
				}
				if model != live || cost != rcost {
					bad++
					if bad <= 5 {
						t.Errorf("%v %v: model peak %d cost %g, rewrite %d cost %g", sg, sg.Trees, model, cost, live, rcost)
					}
				}
			}
			t.Logf("%d schedules recompute some value more than once; %d of them planned", multi, planned)
			if bad > 0 {
				t.Errorf("%d mismatches", bad)
			}
		})
	}
}

// TestMultiDPOptimal compares the dynamic program with multi-level
// segments with brute force over every schedule it can express on small
// chains: at every budget its cost is the least model cost of any schedule
// whose model peak fits (and TestMultiModelExact shows the model peak is
// the rewritten graph's live peak there), its least peak is the least of
// any, it never costs more than the one-level DP, and the lower bound the
// budget mode reports is at most its optimum.
func TestMultiDPOptimal(t *testing.T) {
	for _, tc := range chainCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			c := checkpoint.ChainOf(tc.g, 6)
			nodes, exact := c.Nodes()
			if !exact {
				t.Fatal("the tree fronts were thinned")
			}
			all := allSchedules(c.M(), nodes)
			peaks := make([]int64, len(all))
			costs := make([]float64, len(all))
			least := int64(math.MaxInt64)
			for i, sg := range all {
				peaks[i], costs[i] = c.ModelPeak(sg)
				least = min(least, peaks[i])
			}
			oneLeast, _ := c.LeastPeak(false)
			if got, sg := c.LeastPeak(true); got != least {
				t.Errorf("LeastPeak %d, brute force %d", got, least)
			} else if p, _ := c.ModelPeak(sg); p != least {
				t.Errorf("LeastPeak's schedule %v %v has peak %d, not %d", sg, sg.Trees, p, least)
			}
			budgets := map[int64]bool{least - 1: true}
			for _, p := range peaks {
				budgets[p] = true
			}
			cheaper := 0
			for b := range budgets {
				best := math.Inf(1)
				for i := range all {
					if peaks[i] <= b {
						best = min(best, costs[i])
					}
				}
				sg, cost, ok := c.SolveMulti(b)
				switch {
				case ok != !math.IsInf(best, 1):
					t.Errorf("budget %d: DP feasible %v, brute force best %g", b, ok, best)
				case ok && cost != best:
					t.Errorf("budget %d: DP cost %g (%v %v), brute force %g", b, cost, sg, sg.Trees, best)
				case ok:
					if p, c2 := c.ModelPeak(sg); p > b || c2 != cost {
						t.Errorf("budget %d: the DP's schedule %v %v has peak %d and cost %g, it said %g", b, sg, sg.Trees, p, c2, cost)
					}
					if _, rcost, _, err := c.RewriteCost(sg); err != nil || rcost != cost {
						t.Errorf("budget %d: the rewrite of %v %v costs %g (%v), the DP said %g", b, sg, sg.Trees, rcost, err, cost)
					}
					if lb := checkpoint.LowerBound(tc.g, b); lb > cost*(1+1e-12) {
						t.Errorf("budget %d: lower bound %g above the optimum %g", b, lb, cost)
					}
					_, one, ok1 := c.Solve(b)
					switch {
					case ok1 && one < cost:
						t.Errorf("budget %d: one-level %g cheaper than multi-level %g", b, one, cost)
					case !ok1 || one > cost:
						cheaper++
					}
				}
			}
			t.Logf("least peak %d (one-level %d); %d of %d budgets cheaper with multi-level segments", least, oneLeast, cheaper, len(budgets))
		})
	}
}
