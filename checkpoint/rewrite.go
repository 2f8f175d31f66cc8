package checkpoint

import (
	"math"
	"strconv"

	"github.com/kilnml/kiln/ir"
)

// cloneSet works out which values of rec get clones and where: a value of
// rec is cloned when a backward user reads it or the clone of another
// value of rec does (its arguments outside rec are read from the kept
// originals). A clone goes just before the earliest of its backward users
// and the clones that read it. need and ins are indexed by value id; ins
// is meaningful where need is set. cost is the clones' FLOPs.
func (a *analysis) cloneSet(rec []bool) (need []bool, ins []int, cost float64) {
	return a.cloneSetRange(rec, 0, a.fwdEnd)
}

// A sweep is one recomputation pass of a schedule: it clones the values
// vals (value ids, ascending) for the backward positions lo..hi. A
// schedule is a list of sweeps in the order they run; a value may be
// cloned by several sweeps (multi-level recomputation), each clone a new
// value NAME.remat, NAME.remat2, ...
//
// Which copy of a value x a reader reads:
//   - a backward step at position u reads the clone of x made by the last
//     sweep (in list order) that clones x and whose range lo..hi holds u,
//     or the original when there is none;
//   - a clone made by sweep S reads S's own clone of x when S clones x,
//     else the clone of x made by the last sweep before S that clones x and
//     whose range holds S's lo, else the original.
//
// A clone nobody reads is not made. A clone goes just before the earliest
// of its readers (backward steps and clones), or before position at when
// at >= 0 and that is earlier; clones at one position keep the list order
// (sweep, then value id), so each reads only clones already made.
type sweep struct {
	vals   []int
	lo, hi int
	at     int
}

// schedule is what a decision recomputes: the sweeps in the order they run.
type schedule struct {
	sweeps []sweep
}

// recSchedule is the one-level schedule of rec: one sweep over the whole
// backward, so every backward user of a value of rec reads its clone.
func (a *analysis) recSchedule(rec []bool) schedule {
	var vals []int
	for i := 0; i <= a.fwdEnd && i < len(rec); i++ {
		if rec[i] {
			vals = append(vals, i)
		}
	}
	if len(vals) == 0 {
		return schedule{}
	}
	return schedule{[]sweep{{vals: vals, lo: a.fwdEnd + 1, hi: a.n - 1, at: -1}}}
}

// apply rewrites a.g so that the values of rec are recomputed once each
// (see cloneSet). It returns the clones' ids in the rewritten graph and
// their FLOPs. a is stale afterwards.
func (a *analysis) apply(rec []bool) ([]ir.ID, float64, error) {
	r, err := a.applySchedule(a.recSchedule(rec))
	return r.clones, r.cost, err
}

// rewritten is what applySchedule did.
type rewritten struct {
	clones []ir.ID // the clones' ids in the rewritten graph
	cost   float64 // their FLOPs
	levels int     // the most clones of one value
}

// applySchedule rewrites a.g to run schedule s (see sweep): it appends the
// clones, points each reader at the copy it reads and permutes every clone
// to just before its insertion point. a is stale afterwards.
func (a *analysis) applySchedule(s schedule) (rewritten, error) {
	g := a.g
	type entry struct {
		sw, v   int   // sweep index, value id
		need    bool  // someone reads it
		ins     int   // insertion point (original position)
		clone   ir.ID // the clone, once made
		argFrom []int // per argument: the entry read, or -1 for the original
	}
	var es []entry
	byVal := map[int][]int{} // value id -> its entries, in sweep order
	inSweep := map[[2]int]int{}
	for si, sw := range s.sweeps {
		for _, v := range sw.vals {
			if v < 0 || v > a.fwdEnd || !a.recomputable(v) {
				continue
			}
			if _, dup := inSweep[[2]int{si, v}]; dup {
				continue
			}
			inSweep[[2]int{si, v}] = len(es)
			byVal[v] = append(byVal[v], len(es))
			es = append(es, entry{sw: si, v: v, ins: math.MaxInt})
		}
	}
	if len(es) == 0 {
		return rewritten{}, nil
	}
	// latest returns the last entry of x (sweep index below before, or any
	// when before < 0) whose sweep's range holds position p; -1 if none.
	latest := func(x, p, before int) int {
		list := byVal[x]
		for j := len(list) - 1; j >= 0; j-- {
			e := list[j]
			sw := s.sweeps[es[e].sw]
			if before >= 0 && es[e].sw >= before {
				continue
			}
			if sw.lo <= p && p <= sw.hi {
				return e
			}
		}
		return -1
	}
	for i := range es {
		e := &es[i]
		args := g.Values[e.v].Args
		e.argFrom = make([]int, len(args))
		for j, x := range args {
			if k, ok := inSweep[[2]int{e.sw, int(x)}]; ok {
				e.argFrom[j] = k
			} else {
				e.argFrom[j] = latest(int(x), s.sweeps[e.sw].lo, e.sw)
			}
		}
	}
	// The backward users' arguments.
	userFrom := make([][]int, a.n)
	for u := a.fwdEnd + 1; u < a.n; u++ {
		args := g.Values[u].Args
		for j, x := range args {
			if len(byVal[int(x)]) == 0 {
				continue
			}
			if k := latest(int(x), u, -1); k >= 0 {
				if userFrom[u] == nil {
					userFrom[u] = make([]int, len(args))
					for t := range userFrom[u] {
						userFrom[u][t] = -1
					}
				}
				userFrom[u][j] = k
				es[k].need = true
				es[k].ins = min(es[k].ins, u)
			}
		}
	}
	// Insertion points, readers first: an entry is read by later entries
	// (later sweeps, or higher values of its own sweep) and backward users.
	var cost float64
	for i := len(es) - 1; i >= 0; i-- {
		e := &es[i]
		if !e.need {
			continue
		}
		if at := s.sweeps[e.sw].at; at >= 0 {
			e.ins = min(e.ins, at)
		}
		cost += a.flops[e.v]
		for _, k := range e.argFrom {
			if k >= 0 {
				es[k].need = true
				es[k].ins = min(es[k].ins, e.ins)
			}
		}
	}
	// Make the clones in list order.
	count := map[int]int{}
	var at [][]ir.ID // clones by insertion point
	made, levels := 0, 0
	for i := range es {
		e := &es[i]
		if !e.need {
			continue
		}
		v := g.Values[e.v]
		count[e.v]++
		levels = max(levels, count[e.v])
		suffix := ".remat"
		if count[e.v] > 1 {
			suffix += strconv.Itoa(count[e.v])
		}
		c := ir.Value{Name: g.UniqueName(v.Name + suffix), Type: v.Type, Op: v.Op, Attrs: append(ir.Attrs(nil), v.Attrs...)}
		c.Type.Shape = v.Type.Shape.Clone()
		c.Args = make([]ir.ID, len(v.Args))
		for j, x := range v.Args {
			c.Args[j] = x
			if k := e.argFrom[j]; k >= 0 {
				c.Args[j] = es[k].clone
			}
		}
		e.clone = g.Append(c)
		if at == nil {
			at = make([][]ir.ID, a.n)
		}
		at[e.ins] = append(at[e.ins], e.clone)
		made++
	}
	if made == 0 {
		return rewritten{}, nil
	}
	for u := a.fwdEnd + 1; u < a.n; u++ {
		if userFrom[u] == nil {
			continue
		}
		args := g.Values[u].Args
		for j, k := range userFrom[u] {
			if k >= 0 {
				args[j] = es[k].clone
			}
		}
	}
	order := make([]ir.ID, 0, len(g.Values))
	var ids []ir.ID
	for p := 0; p < a.n; p++ {
		for _, c := range at[p] {
			ids = append(ids, ir.ID(len(order)))
			order = append(order, c)
		}
		order = append(order, ir.ID(p))
	}
	return rewritten{ids, cost, levels}, g.Permute(order)
}
