package passes

import "github.com/kilnml/kiln/ir"

// Inference rewrites g for evaluation: every dropout is replaced by its
// input (its users read the input directly and the dropout is removed), as
// PyTorch's dropout is the identity outside training; and the forward
// graph's updates (the running statistics a training-mode BatchNorm keeps)
// are dropped, as evaluation changes no param or state. A dropout that an
// output or gradient names keeps its value, and so its name, as dropout
// {p=0}, which is the identity.
func Inference(g *ir.Graph) error {
	g.Updates = nil
	named := g.RootMask()
	// rep[id] is the value that stands for id: the input of a chain of
	// dropouts, itself otherwise.
	rep := make([]ir.ID, len(g.Values))
	keep := make([]bool, len(g.Values))
	changed := false
	for i := range g.Values {
		v := &g.Values[i]
		for j, a := range v.Args {
			v.Args[j] = rep[a]
		}
		rep[i], keep[i] = ir.ID(i), true
		if v.Op != ir.OpDropout {
			continue
		}
		changed = true
		if named[i] {
			v.Attrs = v.Attrs.With("p", ir.Float(0))
			continue
		}
		rep[i], keep[i] = v.Args[0], false
	}
	if changed {
		g.Retain(keep)
	}
	return nil
}
