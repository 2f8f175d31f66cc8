package tests

import (
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilnml/kiln/ir"
)

var update = flag.Bool("update", false, "rewrite generated files")

// TestOpsDoc keeps docs/OPS.md equal to the reference generated from the op
// table, so the documentation cannot fall behind the ops.
func TestOpsDoc(t *testing.T) {
	const path = "../docs/OPS.md"
	got := ir.Reference()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("docs/OPS.md is stale; run go test ./tests -run TestOpsDoc -update (-file +generated):\n%s", d)
	}
}
