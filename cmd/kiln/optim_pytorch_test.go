package main

import (
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
)

// TestStepMatchesTorchOptim runs kiln step on every run of
// tests/testdata/pytorch/optim (written by tests/pytorch/optim_reference.py:
// a 2-layer MLP trained for a few steps on one batch by each torch.optim
// optimizer, with and without weight decay, Nesterov, AMSGrad, centered,
// element-wise and global-norm clipping, and each learning-rate schedule
// with warmup) and compares the params after the last step and the losses of
// every step with PyTorch's. Everything is float64; the two differ only in
// the order of sums and in how products are fused, so the bound is
// |kiln - torch| <= 1e-12 + 1e-9*|torch|.
func TestStepMatchesTorchOptim(t *testing.T) {
	t.Parallel()
	dir := "../../tests/testdata/pytorch/optim"
	cases, _ := filepath.Glob(filepath.Join(dir, "*.expected.safetensors"))
	if len(cases) < 30 {
		t.Fatalf("found %d torch.optim reference runs, want at least 30", len(cases))
	}
	model, inputs := filepath.Join(dir, "mlp.kir"), filepath.Join(dir, "mlp.inputs.safetensors")
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".expected.safetensors")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want, meta, err := safetensors.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := strconv.Atoi(meta["steps"]); err != nil || meta["args"] == "" {
				t.Fatalf("%s: metadata %v lacks args and steps", path, meta)
			}
			out := filepath.Join(t.TempDir(), "out.safetensors")
			args := append([]string{"step", model, "-inputs", inputs, "-out", out, "-steps", meta["steps"], "-workers", "1"}, strings.Fields(meta["args"])...)
			runKiln(t, args...).want(t, 0)
			got := readStepOut(t, out)
			if len(got) != len(want) {
				t.Errorf("kiln wrote %d tensors, torch %d", len(got), len(want))
			}
			for _, w := range want {
				g, ok := got[w.Name]
				if !ok {
					t.Errorf("kiln wrote no %q", w.Name)
					continue
				}
				if !g.Type.Equal(w.Type) {
					t.Errorf("%s: kiln %s, torch %s", w.Name, g.Type, w.Type)
					continue
				}
				gv, wv := g.Float64s(), w.Float64s()
				for i := range wv {
					if d := math.Abs(gv[i] - wv[i]); !(d <= 1e-12+1e-9*math.Abs(wv[i])) {
						t.Errorf("%s[%d]: kiln %.17g, torch %.17g (difference %.3g)", w.Name, i, gv[i], wv[i], d)
					}
				}
			}
		})
	}
}
