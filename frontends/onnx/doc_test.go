package onnx

import (
	"fmt"
	"github.com/kilnml/kiln/internal/golden"
	"os"
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
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q", docPath, docBegin, docEnd)
	}
	want := opTable()
	if got := doc[i+len(docBegin) : j]; got != want {
		if golden.Update() {
			if err := os.WriteFile(docPath, []byte(doc[:i+len(docBegin)]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("the op table of %s is stale; run go test ./frontends/onnx -run TestOpTableDoc -update", docPath)
	}
}
