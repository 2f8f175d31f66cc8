package ir

import (
	"fmt"
	"strings"
)

// Dot returns g in Graphviz dot syntax: one node per value labelled with its
// name, op and type; leaves are boxes, outputs are doubly outlined.
func (g *Graph) Dot() string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n", g.Name)
	out := map[ID]bool{}
	for _, o := range g.Outputs {
		out[o] = true
	}
	for i, v := range g.Values {
		shape := "ellipse"
		if v.Op.IsLeaf() {
			shape = "box"
		}
		periph := 1
		if out[ID(i)] {
			periph = 2
		}
		label := fmt.Sprintf("%%%s\\n%s %s", v.Name, v.Op, v.Type)
		fmt.Fprintf(&b, "  v%d [label=\"%s\", shape=%s, peripheries=%d];\n", i, label, shape, periph)
	}
	for i, v := range g.Values {
		for j, a := range v.Args {
			fmt.Fprintf(&b, "  v%d -> v%d [label=\"%d\"];\n", a, i, j)
		}
	}
	for _, gp := range g.Grads {
		fmt.Fprintf(&b, "  v%d -> v%d [style=dashed, label=\"grad\"];\n", gp.Grad, gp.Param)
	}
	for _, u := range g.Updates {
		fmt.Fprintf(&b, "  v%d -> v%d [style=dotted, label=\"update\"];\n", u.Value, u.Target)
	}
	b.WriteString("}\n")
	return b.String()
}
