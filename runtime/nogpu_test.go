//go:build kiln_nogpu

package runtime_test

import (
	"testing"

	"github.com/kilnml/kiln/runtime"
)

// TestNoGPU checks that a program built with -tags kiln_nogpu refuses the
// GPU with a line that says why (go test -tags kiln_nogpu ./runtime).
func TestNoGPU(t *testing.T) {
	p, err := runtime.Load(digitsPlan)
	if err != nil {
		t.Fatal(err)
	}
	_, err = runtime.NewTrainer(p, runtime.ExecOptions{Device: "gpu"})
	want := digitsPlan + ": GPU support was not built in (the program was built with -tags kiln_nogpu)"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}
