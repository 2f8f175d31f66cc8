package ir

import (
	"fmt"
	"strings"
)

// Format returns the canonical .kir text of g. Every value carries its type
// and its canonical attributes, so Parse(Format(g)) gives back g.
func (g *Graph) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %s\n", g.Name)
	for i := range g.Values {
		b.WriteString(g.FormatValue(ID(i)))
		b.WriteByte('\n')
	}
	if len(g.Outputs) > 0 {
		b.WriteString("output ")
		for i, o := range g.Outputs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(g.NameOf(o))
		}
		b.WriteByte('\n')
	}
	for _, gp := range g.Grads {
		fmt.Fprintf(&b, "grad %s = %s\n", g.NameOf(gp.Param), g.NameOf(gp.Grad))
	}
	for _, u := range g.Updates {
		fmt.Fprintf(&b, "update %s = %s\n", g.NameOf(u.Target), g.NameOf(u.Value))
	}
	if len(g.Recompute) > 0 {
		b.WriteString("recompute ")
		for i, id := range g.Recompute {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(g.NameOf(id))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// FormatValue returns the .kir line that defines value id.
func (g *Graph) FormatValue(id ID) string {
	v := &g.Values[id]
	var b strings.Builder
	if v.Op.IsLeaf() {
		b.WriteString(v.Op.String())
		b.WriteString(" %")
		b.WriteString(v.Name)
		b.WriteString(": ")
		b.WriteString(v.Type.String())
	} else {
		b.WriteByte('%')
		b.WriteString(v.Name)
		b.WriteString(": ")
		b.WriteString(v.Type.String())
		b.WriteString(" = ")
		b.WriteString(v.Op.String())
		for i, a := range v.Args {
			if i == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteString(", ")
			}
			b.WriteString(g.NameOf(a))
		}
	}
	if s := v.Attrs.String(); s != "" {
		b.WriteByte(' ')
		b.WriteString(s)
	}
	return b.String()
}

// String returns Format().
func (g *Graph) String() string { return g.Format() }
