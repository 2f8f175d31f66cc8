package checkpoint

import "github.com/kilnml/kiln/ir"

// FLOPs returns the cost model's price of computing value id once: the
// floating-point operations of its op from the static shapes (ir.Cost,
// which each op's table row defines where it is not one per element).
// kiln bench sums it over a plan's steps for the FLOPs per step.
func FLOPs(g *ir.Graph, id ir.ID) float64 {
	v := &g.Values[id]
	if v.Op.IsLeaf() {
		return 0
	}
	args := make([]ir.Type, len(v.Args))
	for i, a := range v.Args {
		args[i] = g.Type(a)
	}
	return ir.Cost(v.Op, args, v.Type, v.Attrs)
}
