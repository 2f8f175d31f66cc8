package tests

import (
	"github.com/kilnml/kiln/internal/golden"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// TestOpsDoc keeps docs/OPS.md equal to the reference generated from the op
// table, so the documentation cannot fall behind the ops.
func TestOpsDoc(t *testing.T) {
	const path = "../docs/OPS.md"
	got := ir.Reference()
	golden.Check(t, path, []byte(got))
}
