package planner_test

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// TestCheckTrainingFrozen checks that CheckTraining accepts a training step
// that leaves a frozen param without an update, and refuses one that fails
// to update a param that is not frozen, or that updates a frozen one.
func TestCheckTrainingFrozen(t *testing.T) {
	sgd, _ := passes.DefaultOptimizer("sgd")
	frozen := compile(t, mlpSrc, kiln.Options{Optimizer: &sgd, Freeze: regexp.MustCompile(`^w1$`)})
	if err := frozen.CheckTraining(); err != nil {
		t.Fatalf("CheckTraining of a step with w1 frozen: %v", err)
	}
	unmark := func(p *planner.Plan, name string, mark bool) *planner.Plan {
		id, _ := p.Graph.Lookup(name)
		v := p.Graph.Value(id)
		v.Attrs = v.Attrs.With("frozen", ir.BoolAttr(mark))
		return p
	}
	for _, tc := range []struct {
		name string
		p    *planner.Plan
		want string
	}{
		{"missing update", unmark(compile(t, mlpSrc, kiln.Options{Optimizer: &sgd, Freeze: regexp.MustCompile(`^w1$`)}), "w1", false),
			"not a training step: it does not update 1 of its 3 params (%w1)"},
		{"missing update of one not frozen", unmark(compile(t, mlpSrc, kiln.Options{Optimizer: &sgd, Freeze: regexp.MustCompile(`^w`)}), "w2", false),
			"not a training step: it does not update 1 of its 2 params not frozen (%w2)"},
		{"frozen updated", unmark(compile(t, mlpSrc, kiln.Options{Optimizer: &sgd}), "b1", true),
			"not a training step: it updates frozen params (%b1); a frozen param keeps its initial value"},
	} {
		if err := tc.p.CheckTraining(); err == nil || err.Error() != tc.want {
			t.Errorf("%s: CheckTraining = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestFileFrozen checks that a plan with a frozen param round-trips in a
// version 4 file, as the train plan, and that a frozen param in a version
// 3 file is refused.
func TestFileFrozen(t *testing.T) {
	adam, _ := passes.DefaultOptimizer("adam")
	p := compile(t, mlpSrc, kiln.Options{Optimizer: &adam, Train: regexp.MustCompile(`2$`)})
	var buf bytes.Buffer
	if err := planner.Encode(&buf, &planner.File{Plans: map[string]*planner.Plan{planner.TrainPlan: p}}); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if v := binary.LittleEndian.Uint32(data[8:]); v != 4 {
		t.Errorf("file version %d, want 4", v)
	}
	f, err := planner.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(p, f.Plans[planner.TrainPlan], planCmp); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	for _, name := range []string{"w1", "b1"} {
		if id, _ := f.Plans[planner.TrainPlan].Graph.Lookup(name); !f.Plans[planner.TrainPlan].Graph.Frozen(id) {
			t.Errorf("%s is not frozen after the round trip", name)
		}
	}
	old := repack(t, data, 3, func(doc []byte) []byte { return doc })
	if _, err := planner.Decode(bytes.NewReader(old)); err == nil || !strings.Contains(err.Error(), "a frozen param in a version 3 file, which has none") {
		t.Errorf("a frozen param in a version 3 file: %v", err)
	}
}
