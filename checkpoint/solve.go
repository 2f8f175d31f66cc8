package checkpoint

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/kilnml/kiln/ir"
)

// Config is what Run needs besides the graph.
type Config struct {
	Policy Policy
	// Measure returns the real peak of a graph Run has rewritten: the
	// planner's arena bytes. Run needs it with a budget; without one it
	// is used, when set, to report the peaks with and without
	// recomputation.
	Measure func(*ir.Graph) (int64, error)
}

// Report says what Run decided and what it costs.
type Report struct {
	Policy Policy
	// Method is how the choice was made: "keep all", "manual", "sqrt",
	// "segments", "chain DP", "chain DP (multi-level)" or "greedy"
	// (budget), "least peak".
	Method string
	// Chain is the number of cut vertices of the chain that the backward
	// reads: the n of the √n rule (0 when the graph has no chain).
	Chain int
	// Kept names the boundaries kept by a segmentation (sqrt, segments,
	// chain DP).
	Kept []string
	// Clones is the number of clones (recomputations of values).
	Clones int
	// Levels is the most clones of one value: 1 for one-level
	// recomputation, more when a multi-level schedule recomputes a value
	// once per level of its tree (0 when nothing is recomputed).
	Levels int
	// RecomputeFLOPs is the cost model's price of the clones;
	// ForwardFLOPs that of the forward values, for scale.
	RecomputeFLOPs, ForwardFLOPs float64
	// ActivationPeak is the most bytes of activations and clones live at
	// any step, KeepAllActivationPeak the same without recomputation.
	ActivationPeak, KeepAllActivationPeak int64
	// Peak and KeepAllPeak are the measured arenas with and without
	// recomputation (0 when not measured).
	Peak, KeepAllPeak int64
	// Budget mode: LowerBoundFLOPs is a lower bound on the recompute
	// FLOPs of any choice whose peak fits the budget (see lowerBound);
	// LeastPeak, when computed, the least arena recomputation reached.
	LowerBoundFLOPs float64
	LeastPeak       int64
	// SegmentationFLOPs is, for a chain, the DP's least recompute FLOPs
	// over one-level segmentations whose model peak fits the budget: no
	// such segmentation whose arena fits costs less where the model is
	// exact (the arena is at least the live bytes the model counts).
	SegmentationFLOPs float64
	// MultiLevelFLOPs is the same over the segmentations whose segments
	// may also be multi-level (a superset, so at most SegmentationFLOPs);
	// 0 when none fits or the chain has no multi-level node.
	MultiLevelFLOPs float64
	// IgnoredMarks counts recompute marks on values that cannot be
	// recomputed or that no backward step reads.
	IgnoredMarks int
}

// String summarizes the report on a few lines.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint %s: %s", r.Policy, r.Method)
	if r.Chain > 0 {
		fmt.Fprintf(&b, ", chain of %d saved cut vertices", r.Chain)
	}
	if len(r.Kept) > 0 {
		fmt.Fprintf(&b, ", %d kept boundaries", len(r.Kept))
	}
	if r.Levels > 1 {
		fmt.Fprintf(&b, "\n  recomputed %d times in all (multi-level: a value up to %d times)", r.Clones, r.Levels)
	} else {
		fmt.Fprintf(&b, "\n  recomputed %d values", r.Clones)
	}
	fmt.Fprintf(&b, ", %.4g FLOPs (%.1f%% of the forward's %.4g)\n", r.RecomputeFLOPs, pct(r.RecomputeFLOPs, r.ForwardFLOPs), r.ForwardFLOPs)
	fmt.Fprintf(&b, "  activations live at most %s (without recomputation %s)\n", FormatBytes(r.ActivationPeak), FormatBytes(r.KeepAllActivationPeak))
	if r.Peak > 0 {
		fmt.Fprintf(&b, "  arena %s (without recomputation %s)\n", FormatBytes(r.Peak), FormatBytes(r.KeepAllPeak))
	}
	if r.Policy.Budget > 0 {
		fmt.Fprintf(&b, "  budget %s", FormatBytes(r.Policy.Budget))
		if r.Policy.Kind == Budget && r.RecomputeFLOPs > 0 {
			fmt.Fprintf(&b, "; recompute lower bound %.4g FLOPs, gap %.4g (%.1f%%)", r.LowerBoundFLOPs, r.RecomputeFLOPs-r.LowerBoundFLOPs, pct(r.RecomputeFLOPs-r.LowerBoundFLOPs, r.LowerBoundFLOPs))
			if r.SegmentationFLOPs > 0 {
				fmt.Fprintf(&b, "; best one-level segmentation in the model %.4g FLOPs", r.SegmentationFLOPs)
			}
			if r.MultiLevelFLOPs > 0 && (r.SegmentationFLOPs == 0 || r.MultiLevelFLOPs < r.SegmentationFLOPs) {
				fmt.Fprintf(&b, "; best with multi-level segments in the model %.4g FLOPs", r.MultiLevelFLOPs)
			}
		}
		b.WriteByte('\n')
	}
	if r.IgnoredMarks > 0 {
		fmt.Fprintf(&b, "  ignored %d recompute marks (values no backward step reads, or not recomputable)\n", r.IgnoredMarks)
	}
	return b.String()
}

func pct(x, of float64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * x / of
}

// Run decides what g recomputes under cfg.Policy, rewrites g accordingly
// and clears its recompute marks. It expects the backward appended and no
// dead values (run DCE first). A budget below the least peak Run can reach
// is an error that states that peak.
func Run(g *ir.Graph, cfg Config) (*Report, error) {
	pol := cfg.Policy
	if pol.Budget > 0 && cfg.Measure == nil {
		return nil, fmt.Errorf("checkpoint: a memory budget needs a way to measure plans")
	}
	a := analyze(g)
	r := &Report{Policy: pol}
	for i := 0; i <= a.fwdEnd; i++ {
		if !g.Values[i].Op.IsLeaf() {
			r.ForwardFLOPs += a.flops[i]
		}
	}
	r.KeepAllActivationPeak = a.activationPeak(a.cand)
	r.ActivationPeak = r.KeepAllActivationPeak
	var sched *schedule
	cutList := a.cuts()
	switch {
	case pol.Kind == None:
		r.Method = "keep all"
	case !anySaved(a):
		r.Method = "keep all (no backward step reads an activation)"
		r.IgnoredMarks = len(g.Recompute)
	case pol.Kind == Manual:
		r.Method = "manual"
		rec := make([]bool, a.n)
		need, _, _ := a.cloneSet(markSet(a, g.Recompute))
		for _, id := range g.Recompute {
			if need[id] {
				rec[id] = true
			} else {
				r.IgnoredMarks++
			}
		}
		sc := a.recSchedule(rec)
		sched = &sc
	case pol.Kind == Sqrt || pol.Kind == Segments:
		if len(cutList) == 0 {
			return nil, fmt.Errorf("checkpoint %s: the graph has no chain (no activation through which the rest of the forward passes); use a memory budget", pol)
		}
		c := newChain(a, thin(cutList, maxBoundaries))
		r.Chain = c.savedCuts()
		k := pol.Segments - 1
		if pol.Kind == Sqrt {
			k = int(math.Round(math.Sqrt(float64(max(r.Chain, 1)))))
		}
		sg := c.evenly(k)
		sc := c.schedule(sg)
		sched = &sc
		r.Method = pol.Kind.String()
		r.Kept = c.names(sg)
	case pol.Kind == Budget:
		var err error
		sched, err = solveBudget(g, a, cutList, cfg, r)
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("checkpoint: unknown policy %s", pol)
	}
	if cfg.Measure != nil && (pol.Budget > 0 || pol.Kind != None) && r.KeepAllPeak == 0 {
		p, err := cfg.Measure(g.Clone())
		if err != nil {
			return nil, err
		}
		r.KeepAllPeak = p
	}
	g.Recompute = nil
	if sched != nil {
		res, err := a.applySchedule(*sched)
		if err != nil {
			return nil, err
		}
		r.Clones, r.RecomputeFLOPs, r.Levels = len(res.clones), res.cost, res.levels
		b := analyze(g)
		act := append([]bool(nil), b.cand...)
		for _, c := range res.clones {
			act[c] = true
		}
		r.ActivationPeak = b.activationPeak(act)
	}
	if cfg.Measure != nil && (pol.Budget > 0 || pol.Kind != None) {
		p, err := cfg.Measure(g.Clone())
		if err != nil {
			return nil, err
		}
		r.Peak = p
		switch {
		case pol.Budget > 0 && p > pol.Budget && sched == nil && pol.Kind != None:
			return nil, fmt.Errorf("memory budget %s is below the least peak recomputation reaches: %s (nothing to recompute)", FormatBytes(pol.Budget), FormatBytes(p))
		case pol.Budget > 0 && p > pol.Budget:
			return nil, fmt.Errorf("memory budget %s: the plan of checkpoint policy %s needs %s; give the budget alone to let the solver choose", FormatBytes(pol.Budget), pol.Kind, FormatBytes(p))
		}
	}
	return r, nil
}

func anySaved(a *analysis) bool {
	for _, s := range a.saved {
		if s {
			return true
		}
	}
	return false
}

func markSet(a *analysis, ids []ir.ID) []bool {
	rec := make([]bool, a.n)
	for _, id := range ids {
		if int(id) < a.n {
			rec[id] = true
		}
	}
	return rec
}

// names returns the names of a segmentation's kept boundaries.
func (c *chain) names(sg segmentation) []string {
	var out []string
	for _, k := range sg.kept {
		out = append(out, c.a.g.Values[c.bd[k]].Name)
	}
	return out
}

// measureSchedule returns the arena of g rewritten to run schedule s.
func measureSchedule(g *ir.Graph, s schedule, measure func(*ir.Graph) (int64, error)) (int64, error) {
	h := g.Clone()
	if _, err := analyze(h).applySchedule(s); err != nil {
		return 0, err
	}
	return measure(h)
}

// tightenRounds bounds how often a solver re-solves with a budget lowered
// by the amount its last answer's real arena exceeded the budget (for the
// DP, below its last answer's model peak by that amount, then bisecting
// between the model peaks of answers that fit and did not).
const tightenRounds = 8

type choice struct {
	sched  schedule
	cost   float64
	arena  int64
	method string
	kept   []string
}

// solveBudget chooses what to recompute so that the arena fits
// cfg.Policy.Budget with the least recompute FLOPs: the chain's dynamic
// program with multi-level segments and without (one-level only), and the
// greedy solver, each propose an answer, checked by measuring its real
// arena (and re-solved with a tighter budget when it does not fit); the
// cheapest answer that fits wins. It fills r's budget fields.
func solveBudget(g *ir.Graph, a *analysis, cuts []int, cfg Config, r *Report) (*schedule, error) {
	budget := cfg.Policy.Budget
	keepAll, err := cfg.Measure(g.Clone())
	if err != nil {
		return nil, err
	}
	r.KeepAllPeak = keepAll
	if keepAll <= budget {
		r.Method = "keep all (fits the budget)"
		return nil, nil
	}
	r.LowerBoundFLOPs = a.lowerBound(budget)
	var best *choice
	consider := func(c *choice) {
		if c != nil && c.arena <= budget && (best == nil || c.cost < best.cost) {
			best = c
		}
	}
	var ch *chain
	if len(cuts) > 0 {
		ch = newChain(a, thin(cuts, maxBoundaries))
		r.Chain = ch.savedCuts()
		for _, multi := range []bool{true, false} {
			// Solve at the budget; when the answer's arena does not fit,
			// aim below its model peak by what its arena exceeds the
			// budget (the placement's overhead); once an answer fits,
			// bisect between its model peak and the least that did not.
			target := budget
			fitPeak, failPeak := int64(-1), int64(math.MaxInt64)
			for round := 0; round < tightenRounds; round++ {
				sg, cost, ok := ch.solve(target, multi)
				if !ok {
					break
				}
				if round == 0 && multi {
					r.MultiLevelFLOPs = cost
				} else if round == 0 {
					r.SegmentationFLOPs = cost
				}
				peak, _ := ch.modelPeak(sg)
				if peak <= fitPeak {
					break // no cheaper answer between
				}
				sc := ch.schedule(sg)
				arena, err := measureSchedule(g, sc, cfg.Measure)
				if err != nil {
					return nil, err
				}
				if arena <= budget {
					method := "chain DP"
					if sg.multiLevel() {
						method = "chain DP (multi-level)"
					}
					consider(&choice{sc, cost, arena, method, ch.names(sg)})
					fitPeak = peak
				} else {
					failPeak = min(failPeak, peak)
				}
				switch {
				case failPeak == math.MaxInt64:
					// The first answer fits: the model's optimum.
				case fitPeak < 0:
					target = min(target, peak) - max(arena-budget, Align)
					continue
				case failPeak-fitPeak > Align:
					target = fitPeak + (failPeak-fitPeak)/2
					continue
				}
				break
			}
		}
		// The √n rule's answer, when it fits, bounds the cost at the same
		// budget even where the arena's placement defeats the model.
		sg := ch.evenly(int(math.Round(math.Sqrt(float64(max(r.Chain, 1))))))
		_, cost := ch.modelPeak(sg)
		if best == nil || cost < best.cost {
			sc := ch.schedule(sg)
			arena, err := measureSchedule(g, sc, cfg.Measure)
			if err != nil {
				return nil, err
			}
			consider(&choice{sc, cost, arena, "sqrt", ch.names(sg)})
		}
	}
	target := budget
	rec := make([]bool, a.n)
	for round := 0; round < tightenRounds; round++ {
		var ok bool
		rec, ok = a.greedy(target, rec)
		if !ok {
			break
		}
		sc := a.recSchedule(rec)
		arena, err := measureSchedule(g, sc, cfg.Measure)
		if err != nil {
			return nil, err
		}
		if arena <= budget {
			_, _, cost := a.cloneSet(rec)
			consider(&choice{sc, cost, arena, "greedy", nil})
			break
		}
		target -= max(arena-budget, Align)
	}
	if best == nil {
		// No answer fits: find the least arena any of the solvers'
		// answers reaches, among the chain's least-peak segmentations
		// (with multi-level segments and without), the even
		// segmentations with 1..2√n+2 boundaries and the greedy run
		// until it is stuck.
		least := keepAll
		try := func(sc schedule, method string, kept []string) error {
			arena, err := measureSchedule(g, sc, cfg.Measure)
			if err != nil {
				return err
			}
			least = min(least, arena)
			if arena <= budget {
				h := g.Clone()
				res, err := analyze(h).applySchedule(sc)
				if err != nil {
					return err
				}
				consider(&choice{sc, res.cost, arena, method, kept})
			}
			return nil
		}
		if ch != nil {
			for _, multi := range []bool{true, false} {
				_, sg := ch.leastPeak(multi)
				if err := try(ch.schedule(sg), "least peak", ch.names(sg)); err != nil {
					return nil, err
				}
			}
			for k := 1; k <= min(ch.m, 2*int(math.Sqrt(float64(ch.m)))+2); k++ {
				sg := ch.evenly(k)
				if err := try(ch.schedule(sg), "least peak", ch.names(sg)); err != nil {
					return nil, err
				}
			}
		}
		rec, _ := a.greedy(0, make([]bool, a.n))
		if err := try(a.recSchedule(rec), "least peak", nil); err != nil {
			return nil, err
		}
		r.LeastPeak = least
		if best == nil {
			return nil, fmt.Errorf("memory budget %s is below the least peak recomputation reaches: %s (without recomputation %s)",
				FormatBytes(budget), FormatBytes(least), FormatBytes(keepAll))
		}
	}
	r.Method, r.Kept = best.method, best.kept
	return &best.sched, nil
}

// greedy adds activations to rec, most bytes saved per FLOP first, until
// the live bytes at every step (the planner's lower bound, on the
// rewritten graph) are at most budget. Each step looks at the step with
// the most live bytes and recomputes one activation kept live across it,
// together with the activations no backward step reads that its clone
// would otherwise keep alive; a try that does not lower the peak is
// undone. It returns false when it gets stuck above the budget.
func (a *analysis) greedy(budget int64, rec []bool) ([]bool, bool) {
	rec = append([]bool(nil), rec...)
	peak, at, live := a.simulate(rec)
	tried := map[int]bool{}
	for peak > budget {
		type option struct {
			v     int
			group []int
			score float64
		}
		var opts []option
		for _, v := range live {
			if rec[v] || tried[v] {
				continue
			}
			group := a.group(v, rec)
			var flops float64
			for _, x := range group {
				flops += a.flops[x]
			}
			opts = append(opts, option{v, group, float64(a.size[v]) / (flops + 1)})
		}
		if len(opts) == 0 {
			return rec, false
		}
		sort.Slice(opts, func(i, j int) bool {
			if opts[i].score != opts[j].score {
				return opts[i].score > opts[j].score
			}
			return opts[i].v < opts[j].v
		})
		improved := false
		for _, o := range opts[:min(len(opts), 4)] {
			next := append([]bool(nil), rec...)
			for _, x := range o.group {
				next[x] = true
			}
			p, q, l := a.simulate(next)
			tried[o.v] = true
			if p < peak || (p == peak && q != at) {
				rec, peak, at, live = next, p, q, l
				improved = true
				clear(tried)
				break
			}
		}
		if !improved && len(opts) <= 4 {
			return rec, false
		}
	}
	return rec, true
}

// group returns v and the activations that v's clone would need and that
// no backward step reads (so nothing else keeps them), recursively.
func (a *analysis) group(v int, rec []bool) []int {
	out := []int{v}
	for i := 0; i < len(out); i++ {
		for _, x := range a.g.Values[out[i]].Args {
			if a.cand[x] && !a.saved[x] && !rec[x] && !contains(out, int(x)) {
				out = append(out, int(x))
			}
		}
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// simulate rewrites a copy of the graph with rec recomputed and returns its
// peak live bytes, the step where it is reached (in the rewritten graph)
// and the activations (ids of a's graph) kept live across that step between
// their last forward and first backward use: those whose recomputation
// could free bytes there.
func (a *analysis) simulate(rec []bool) (int64, int, []int) {
	h := a.g.Clone()
	if _, _, err := analyze(h).apply(rec); err != nil {
		return math.MaxInt64, -1, nil
	}
	b := analyze(h)
	live, peak := b.profile()
	at := -1
	for p := 0; p <= b.n; p++ {
		if b.isStep[p] && live[p] == peak {
			at = p
			break
		}
	}
	var out []int
	for i := range h.Values {
		if i < b.n && b.cand[i] && b.lastFwd[i] < at && at < b.firstBwd[i] {
			if id, ok := a.g.Lookup(h.Values[i].Name); ok && a.cand[id] {
				out = append(out, int(id))
			}
		}
	}
	return peak, at, out
}

// lowerBound returns a lower bound on the recompute FLOPs of any schedule
// (one-level or multi-level: any sweeps applySchedule runs) whose live
// bytes, by this package's mirror of the planner's liveness, stay within
// budget at every step. The planner of a compile with recomputation keeps
// the graph's order and shares no memory in place, so its arena is at
// least those live bytes: the bound holds for every plan that fits.
//
// Proof. Take a step p of the graph g without recomputation whose live
// bytes exceed the budget by need, L the values live at p, and h the graph
// a schedule rewrites g into. The rewrite keeps the order of g's values and
// inserts clones; forward steps read originals, backward steps and clones
// read originals or clones, and only recomputable values get clones. Every
// w in L has at step p of h a copy of its own live (w, or a clone of w),
// unless w is recomputable, computed before p, read by no forward step
// from p on and not read by step p (lastFwd[w] < p), and a clone of w is
// made after p, which costs flops[w]: call such w freed, F the freed
// values. So h has at p at least live(p) - Σ_{w∈F} size[w] bytes of copies
// of L, and the schedule costs at least Σ_{w∈F} flops[w]. A freed w's
// clone, made after p, reads a copy of each argument x; when x is not in L
// that copy is x kept live across p or a clone of x made before p (either
// adds size[x] bytes at p, a copy of no value of L) or a clone of x made
// after p (which costs flops[x]; x is in no other term). Such an x may be
// read by k_x freeable values; charge each of them size[x]/k_x bytes, with
// a piece of size[x]/k_x bytes for flops[x]/k_x that buys the charge back.
// Taking w's piece (size[w] less its charges, for flops[w]) for each w of
// F, and x's pieces of F's readers when x is recomputed after p, frees at
// least the bytes the schedule frees at p for at most its cost. Buying any
// pieces independently and fractionally only widens the choice, so the
// cheapest way to free need bytes with them (a fractional knapsack: pieces
// in order of FLOPs per byte) is a lower bound at p, and the largest over
// the steps is one for the schedule. It is +Inf when the pieces cannot free
// need bytes at some step: no schedule fits.
//
// It takes time O(steps · values).
func (a *analysis) lowerBound(budget int64) float64 {
	live, _ := a.profile()
	best := 0.0
	type piece struct {
		size, flops float64
	}
	liveAt := func(x, p int) bool { return a.always[x] || (x <= p && p <= a.end[x]) }
	var ps []piece
	var free []int
	readers := map[ir.ID]int{}
	reads := func(u, x int) bool { return slices.Contains(a.g.Values[u].Args, ir.ID(x)) }
	for p := 0; p <= a.n; p++ {
		if !a.isStep[p] || live[p] <= budget {
			continue
		}
		need := float64(live[p] - budget)
		free = free[:0]
		for w := 0; w < p; w++ {
			if a.recomputable(w) && liveAt(w, p) && a.lastFwd[w] < p && !reads(p, w) {
				free = append(free, w)
			}
		}
		clear(readers)
		for _, w := range free {
			for j, x := range a.g.Values[w].Args {
				if !liveAt(int(x), p) && !slices.Contains(a.g.Values[w].Args[:j], x) {
					readers[x]++
				}
			}
		}
		ps = ps[:0]
		var total float64
		for _, w := range free {
			net := float64(a.size[w])
			for j, x := range a.g.Values[w].Args {
				if k := readers[x]; k > 0 && !slices.Contains(a.g.Values[w].Args[:j], x) {
					share := float64(a.size[x]) / float64(k)
					net -= share
					if a.recomputable(int(x)) {
						ps = append(ps, piece{share, a.flops[x] / float64(k)})
						total += share
					}
				}
			}
			if net > 0 {
				ps = append(ps, piece{net, a.flops[w]})
				total += net
			}
		}
		if total < need {
			return math.Inf(1)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].flops*ps[j].size < ps[j].flops*ps[i].size })
		cost := 0.0
		for _, x := range ps {
			if need <= 0 {
				break
			}
			take := min(need, x.size)
			cost += x.flops * take / x.size
			need -= take
		}
		best = max(best, cost)
	}
	return best
}
