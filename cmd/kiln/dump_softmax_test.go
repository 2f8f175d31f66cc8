package main

import (
	"regexp"
	"slices"
	"testing"

	"github.com/kilnml/kiln/internal/golden"
)

var dumpOp = regexp.MustCompile(`(?m)^%\S+: \S+ = (\S+) `)

// TestDumpSoftmaxStep compares the dump of bench/softmax_step.kir's SGD
// step with testdata/softmax_step.dump.golden (go test -update rewrites
// it) and checks its ops, so that a rewritten golden cannot lose a fusion:
// the softmax with its product as prologue, the loss's reduction with its
// product, and the softmax gradient with the product after it and the SGD
// update as epilogue (a training step does not store its gradients).
func TestDumpSoftmaxStep(t *testing.T) {
	t.Parallel()
	r := runKiln(t, "dump", "-optimizer", "sgd", "../../bench/softmax_step.kir")
	r.want(t, 0)
	golden.Check(t, "testdata/softmax_step.dump.golden", []byte(r.stdout))
	var ops []string
	for _, m := range dumpOp.FindAllStringSubmatch(r.stdout, -1) {
		ops = append(ops, m[1])
	}
	if want := []string{"fused_softmax", "fused_reduce", "fused_softmax_grad"}; !slices.Equal(ops, want) {
		t.Errorf("ops %v, want %v:\n%s", ops, want, r.stdout)
	}
}
