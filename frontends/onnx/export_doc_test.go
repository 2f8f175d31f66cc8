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
	exportDocBegin = "<!-- export table: generated from frontends/onnx.exportOps -->\n"
	exportDocEnd   = "<!-- end of export table -->\n"
)

// exportTable returns the Markdown table of exportOps, sorted by kiln op.
func exportTable() string {
	rows := make([]string, 0, len(exportOps))
	for op, r := range exportOps {
		rows = append(rows, fmt.Sprintf("| `%s` | %s |\n", op, strings.ReplaceAll(r.Doc, "|", "\\|")))
	}
	sort.Strings(rows)
	return "| kiln op | ONNX |\n|---|---|\n" + strings.Join(rows, "")
}

// TestExportTableDoc keeps the export table of docs/ONNX.md equal to the
// table exportOps; -update rewrites it.
func TestExportTableDoc(t *testing.T) {
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, exportDocBegin), strings.Index(doc, exportDocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q", docPath, exportDocBegin, exportDocEnd)
	}
	want := exportTable()
	if got := doc[i+len(exportDocBegin) : j]; got != want {
		if golden.Update() {
			if err := os.WriteFile(docPath, []byte(doc[:i+len(exportDocBegin)]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("the export table of %s is stale; run go test ./frontends/onnx -run TestExportTableDoc -update", docPath)
	}
}
