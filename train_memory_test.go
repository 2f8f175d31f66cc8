package kiln_test

import (
	"regexp"
	"runtime/debug"
	"testing"

	"github.com/kilnml/kiln"
)

// TestTrainerMemoryIsCheckedAsAWhole checks that a trainer whose two arenas
// each fit in the memory available, but not together with its batch
// buffers, is refused before anything is allocated. The memory available is
// set with the Go memory limit (which sysmem honours), so the test changes
// the process's limit and does not run in parallel.
func TestTrainerMemoryIsCheckedAsAWhole(t *testing.T) {
	tr := newTrainer(t, regressionMLP(64), 0.01)
	train, eval := tr.Plan, tr.EvalPlan
	limit := max(train.ArenaBytes, eval.ArenaBytes) + 1024
	if limit >= train.ArenaBytes+eval.ArenaBytes {
		t.Fatalf("arenas of %d and %d bytes: the test needs neither to be under 1 KiB", train.ArenaBytes, eval.ArenaBytes)
	}
	old := debug.SetMemoryLimit(limit)
	defer debug.SetMemoryLimit(old)
	x, err := kiln.NewTrainerFromPlans(train, eval, kiln.ExecOptions{Workers: 1})
	if err == nil {
		x.Close()
		t.Fatalf("NewTrainerFromPlans built a trainer of arenas %d and %d bytes under a limit of %d", train.ArenaBytes, eval.ArenaBytes, limit)
	}
	re := regexp.MustCompile(`^plan regress: training memory of [0-9.]+ KiB exceeds the [0-9.]+ KiB of memory available \(arenas [0-9.]+ KiB and [0-9.]+ KiB, batch buffers [0-9.]+ KiB\)$`)
	if !re.MatchString(err.Error()) {
		t.Errorf("error %q does not match %s", err, re)
	}
}
