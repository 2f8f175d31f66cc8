package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
)

// TestRun trains the runtime package's digits plan for two epochs and
// checks what it prints and writes; it refuses bad arguments.
func TestRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "p.safetensors")
	var sb strings.Builder
	if err := run([]string{"-epochs", "2", "-out", out, "../../runtime/testdata/digits.kplan"}, &sb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(sb.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "epoch 1: loss ") || !strings.HasPrefix(lines[2], "held out: loss ") || !strings.Contains(lines[2], "accuracy 0.") {
		t.Fatalf("output:\n%s", sb.String())
	}
	ts, _, err := safetensors.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 4 {
		t.Fatalf("%s holds %d tensors, want the 4 params", out, len(ts))
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: plantrain"},
		{[]string{"-epochs", "0", "x.kplan"}, "-epochs 0: expected at least 1"},
		{[]string{"missing.kplan"}, "missing.kplan"},
	} {
		if err := run(tc.args, &sb); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
