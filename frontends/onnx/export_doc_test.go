package onnx

import (
	"fmt"
	"github.com/kilnml/kiln/internal/golden"
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
	golden.CheckSection(t, docPath, exportDocBegin, exportDocEnd, exportTable())
}
