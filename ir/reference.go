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
		args := formatArgs(info)
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
		case info.NoGrad != "":
			grad = "no: " + info.NoGrad
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", op, args, strings.Join(attrs, "<br>"), grad, info.Doc)
	}
	return b.String()
}

// formatArgs writes an op's arguments as the text format takes them:
// optional ones in brackets, a repeated one with "...".
func formatArgs(info *OpInfo) string {
	parts := make([]string, len(info.Args))
	for i, a := range info.Args {
		switch {
		case info.Variadic && i == len(info.Args)-1:
			parts[i] = a + "..."
		case i >= len(info.Args)-info.Optional:
			parts[i] = "[" + a + "]"
		default:
			parts[i] = a
		}
	}
	return strings.Join(parts, ", ")
}

// Signature returns the op as the text format writes it, for listings:
// its arguments, then its attributes with defaults (required ones as
// name=<kind>, optional ones in brackets).
func (op Op) Signature() string {
	info := op.Info()
	s := info.Name
	if a := formatArgs(info); a != "" {
		s += " " + a
	}
	var attrs []string
	for _, a := range info.Attrs {
		switch {
		case a.Required:
			attrs = append(attrs, a.Name+"=<"+a.Kind.String()+">")
		case a.Default != nil:
			attrs = append(attrs, a.Name+"="+a.Default.String())
		default:
			attrs = append(attrs, "["+a.Name+"=<"+a.Kind.String()+">]")
		}
	}
	if len(attrs) > 0 {
		s += " {" + strings.Join(attrs, ", ") + "}"
	}
	return s
}
