package checkpoint

import (
	"math"

	"github.com/kilnml/kiln/ir"
)

// cloneSet works out which values of rec get clones and where: a value of
// rec is cloned when a backward user reads it or the clone of another
// value of rec does (its arguments outside rec are read from the kept
// originals). A clone goes just before the earliest of its backward users
// and the clones that read it. need and ins are indexed by value id; ins
// is meaningful where need is set. cost is the clones' FLOPs.
func (a *analysis) cloneSet(rec []bool) (need []bool, ins []int, cost float64) {
	need = make([]bool, a.n)
	ins = make([]int, a.n)
	for i := range ins {
		ins[i] = math.MaxInt
	}
	for i := a.fwdEnd; i >= 0; i-- {
		if !rec[i] || !a.recomputable(i) {
			continue
		}
		if a.firstBwd[i] >= 0 {
			ins[i] = min(ins[i], a.firstBwd[i])
		}
		if ins[i] == math.MaxInt {
			continue
		}
		need[i] = true
		cost += a.flops[i]
		for _, x := range a.g.Values[i].Args {
			if rec[x] {
				ins[x] = min(ins[x], ins[i])
			}
		}
	}
	return need, ins, cost
}

// apply rewrites a.g so that the values of rec are recomputed (see
// cloneSet): it appends the clones, named NAME.remat, points the backward
// users at them and permutes every clone to just before its insertion
// point (clones at one point in value order). It returns the clones' ids
// in the rewritten graph and their FLOPs. a is stale afterwards.
func (a *analysis) apply(rec []bool) ([]ir.ID, float64, error) {
	g := a.g
	need, ins, cost := a.cloneSet(rec)
	clone := make([]ir.ID, a.n)
	var at [][]ir.ID // clones by insertion point
	count := 0
	for i := 0; i <= a.fwdEnd; i++ {
		if !need[i] {
			continue
		}
		v := g.Values[i]
		c := ir.Value{Name: g.UniqueName(v.Name + ".remat"), Type: v.Type, Op: v.Op, Attrs: append(ir.Attrs(nil), v.Attrs...)}
		c.Type.Shape = v.Type.Shape.Clone()
		c.Args = make([]ir.ID, len(v.Args))
		for j, x := range v.Args {
			c.Args[j] = x
			if need[x] {
				c.Args[j] = clone[x]
			}
		}
		clone[i] = g.Append(c)
		if at == nil {
			at = make([][]ir.ID, a.n)
		}
		at[ins[i]] = append(at[ins[i]], clone[i])
		count++
	}
	if count == 0 {
		return nil, 0, nil
	}
	for u := a.fwdEnd + 1; u < a.n; u++ {
		args := g.Values[u].Args
		for j, x := range args {
			if need[x] {
				args[j] = clone[x]
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
	return ids, cost, g.Permute(order)
}
