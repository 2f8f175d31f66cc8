package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnml/kiln/planner"
)

// TestSchedule checks that the learning-rate schedule lives in the plan:
// it changes the result; kiln run from a plan file compiled with it is
// bitwise kiln train with the same flags (T is the run's own number of
// updates), for a graph with data and one without; the plan file records
// it; -resume refuses another schedule, warmup or run length, naming it.
// (TestResumeAfterKill resumes a run in the middle of a schedule.)
func TestSchedule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(path(name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	seek := writeFile(t, "seek.kir", seekKir)
	tiny := writeFile(t, "tiny.kir", tinyMLPKir)
	data := writeFile(t, "blobs.csv", separableCSV(100, 2, 3))
	sched := []string{"-optimizer", "adamw", "-lr", "0.05", "-lr-schedule", "cosine", "-warmup", "5"}

	runKiln(t, append([]string{"train", seek, "-steps", "30", "-save", path("s30")}, sched...)...).want(t, 0)
	runKiln(t, "train", seek, "-steps", "30", "-optimizer", "adamw", "-lr", "0.05", "-save", path("flat")).want(t, 0)
	if bytes.Equal(read("s30"), read("flat")) {
		t.Error("the schedule changes nothing")
	}
	runKiln(t, append([]string{"compile", seek, "-o", path("seek.kplan")}, sched...)...).want(t, 0)
	runKiln(t, "run", path("seek.kplan"), "-steps", "30", "-save", path("runs30")).want(t, 0)
	if !bytes.Equal(read("s30"), read("runs30")) {
		t.Error("kiln run of the compiled schedule differs from kiln train (no inputs)")
	}

	runKiln(t, append([]string{"train", tiny, "-data", data, "-epochs", "3", "-save", path("t3"), "-checkpoint", path("d")}, sched...)...).want(t, 0)
	runKiln(t, append([]string{"compile", tiny, "-o", path("p.kplan")}, sched...)...).want(t, 0)
	runKiln(t, "run", path("p.kplan"), "-data", data, "-epochs", "3", "-save", path("run3")).want(t, 0)
	if !bytes.Equal(read("t3"), read("run3")) {
		t.Error("kiln run of the compiled schedule differs from kiln train (data)")
	}
	f, err := planner.Load(path("p.kplan"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Meta["lr-schedule"] != "cosine" || f.Meta["warmup"] != "5" {
		t.Errorf("plan file metadata: lr-schedule %q, warmup %q", f.Meta["lr-schedule"], f.Meta["warmup"])
	}

	prefix := "kiln train: -resume: checkpoint " + path("d") + " was trained with "
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"linear", []string{"-optimizer", "adamw", "-lr", "0.05", "-lr-schedule", "linear", "-warmup", "5", "-epochs", "3"}, prefix + "-lr-schedule cosine, this run has -lr-schedule linear"},
		{"warmup", []string{"-optimizer", "adamw", "-lr", "0.05", "-lr-schedule", "cosine", "-warmup", "4", "-epochs", "3"}, prefix + "-warmup 5, this run has -warmup 4"},
		{"longer", append([]string{"-epochs", "4"}, sched...), prefix + "schedule updates 30, this run has schedule updates 40"},
	} {
		r := runKiln(t, append([]string{"train", tiny, "-data", data, "-checkpoint", path("d"), "-resume"}, tt.args...)...)
		r.want(t, 1)
		containsAll(t, tt.name, oneLine(t, r.stderr), tt.want)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-lr-schedule", "exp"}, `unknown learning-rate schedule "exp" (expected constant, cosine, linear, step)`},
		{[]string{"-warmup", "-1"}, "warmup and total steps must be >= 0, found -1 and 0"},
		{[]string{"-lr-schedule", "step"}, "the step schedule needs a step size >= 1 and a gamma > 0, found 0 and 0.1"},
		{[]string{"-lr-schedule", "cosine", "-lr-gamma", "0.5"}, "-lr-step-size and -lr-gamma are for -lr-schedule step"},
	} {
		r := runKiln(t, append([]string{"train", seek}, tt.args...)...)
		r.want(t, 2)
		containsAll(t, "stderr", r.stderr, "kiln train: "+tt.want+"\n")
	}
}
