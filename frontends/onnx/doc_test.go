package onnx

import (
	"fmt"
	"github.com/kilnml/kiln/internal/golden"
	"sort"
	"strings"
	"testing"
)

const (
	docPath  = "../../docs/ONNX.md"
	docBegin = "<!-- op table: generated from frontends/onnx.Ops -->\n"
	docEnd   = "<!-- end of op table -->\n"
)

// opTable returns the Markdown table of Ops, sorted by op type.
func opTable() string {
	names := make([]string, 0, len(Ops))
	for k := range Ops {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("| ONNX op | kiln ops and rules |\n|---|---|\n")
	for _, k := range names {
		fmt.Fprintf(&b, "| `%s` | %s |\n", k, strings.ReplaceAll(Ops[k].Doc, "|", "\\|"))
	}
	return b.String()
}

// TestOpTableDoc keeps the op table of docs/ONNX.md equal to the table
// Ops; -update rewrites it.
func TestOpTableDoc(t *testing.T) {
	golden.CheckSection(t, docPath, docBegin, docEnd, opTable())
}
