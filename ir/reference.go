package ir

import (
	"fmt"
	"strings"
)

// Reference returns the op reference in Markdown, generated from the op
// table: every op with its arguments, attributes (kind, default, meaning),
// whether gradients flow through it, and its description. docs/OPS.md is
// this text; a test keeps the two equal.
func Reference() string {
	var b strings.Builder
	b.WriteString("# kiln ops\n\n")
	b.WriteString("Generated from the op table (`ir/op.go`) by `ir.Reference`; do not edit by hand.\n")
	b.WriteString("Regenerate with `go test ./tests -run TestOpsDoc -update`.\n\n")
	b.WriteString("| op | arguments | attributes | gradient | description |\n|---|---|---|---|---|\n")
	for _, op := range Ops() {
		info := op.Info()
		args := strings.Join(info.Args, ", ")
		if op.IsLeaf() {
			args = "(declaration)"
		}
		var attrs []string
		for _, a := range info.Attrs {
			s := fmt.Sprintf("`%s` (%s", a.Name, a.Kind)
			switch {
			case a.Required:
				s += ", required"
			case a.Default != nil:
				s += ", default " + a.Default.String()
			default:
				s += ", optional"
			}
			s += "): " + a.Doc
			attrs = append(attrs, s)
		}
		grad := "no"
		switch {
		case op.Differentiable():
			grad = "yes"
		case op.IsLeaf():
			grad = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", op, args, strings.Join(attrs, "<br>"), grad, info.Doc)
	}
	return b.String()
}
