package main

import (
	"strings"
	"testing"
)

// TestDumpAttention checks that kiln dump shows the transformer example's
// attention as attention and attention_grad ops (two blocks: two of each)
// and no attention softmax (one softmax is left: the cross-entropy's
// backward), and that -O0 shows the two softmaxes and no attention.
func TestDumpAttention(t *testing.T) {
	t.Parallel()
	const model = "../../examples/transformer/reverse.kir"
	r := runKiln(t, "dump", model)
	r.want(t, 0)
	if n, m, s := strings.Count(r.stdout, "= attention "), strings.Count(r.stdout, "= attention_grad "), strings.Count(r.stdout, "= softmax "); n != 2 || m != 2 || s != 1 {
		t.Errorf("kiln dump %s: %d attention, %d attention_grad, %d softmax; want 2, 2, 1", model, n, m, s)
	}
	r = runKiln(t, "dump", "-O0", model)
	r.want(t, 0)
	if n, s := strings.Count(r.stdout, "= attention"), strings.Count(r.stdout, "= softmax "); n != 0 || s != 3 {
		t.Errorf("kiln dump -O0 %s: %d attention, %d softmax; want 0, 3", model, n, s)
	}
}
