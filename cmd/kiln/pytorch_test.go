package main

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
)

// TestGradMatchesPyTorch runs kiln grad on the graphs of
// tests/testdata/pytorch, which mix the ops of the catalog, and compares
// every output and gradient with the values PyTorch computed for the same
// inputs (tests/pytorch/reference.py wrote them). Everything is float64;
// the two differ only in summation order and in the evaluation of special
// functions, so the bound is |kiln - torch| <= 1e-12 + 1e-9*|torch|.
func TestGradMatchesPyTorch(t *testing.T) {
	models, _ := filepath.Glob("../../tests/testdata/pytorch/*.kir")
	if len(models) == 0 {
		t.Fatal("no PyTorch reference cases")
	}
	for _, model := range models {
		base := strings.TrimSuffix(model, ".kir")
		t.Run(filepath.Base(base), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.safetensors")
			var stdout, stderr bytes.Buffer
			if code := run([]string{"grad", model, "-inputs", base + ".inputs.safetensors", "-out", out}, &stdout, &stderr); code != 0 {
				t.Fatalf("kiln grad: exit %d: %s", code, stderr.String())
			}
			got, _, err := safetensors.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := safetensors.ReadFile(base + ".expected.safetensors")
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]safetensors.Tensor{}
			for _, g := range got {
				byName[g.Name] = g
			}
			for _, w := range want {
				g, ok := byName[w.Name]
				if !ok {
					t.Errorf("kiln wrote no %q", w.Name)
					continue
				}
				if !g.Type.Equal(w.Type) {
					t.Errorf("%s: kiln %s, torch %s", w.Name, g.Type, w.Type)
					continue
				}
				gv, wv := g.Float64s(), w.Float64s()
				worst, at := 0.0, -1
				for i := range wv {
					excess := math.Abs(gv[i]-wv[i]) - (1e-12 + 1e-9*math.Abs(wv[i]))
					if at < 0 || excess > worst || math.IsNaN(gv[i]) {
						worst, at = excess, i
					}
				}
				if at >= 0 && !(worst <= 0) {
					t.Errorf("%s[%d]: kiln %.17g, torch %.17g", w.Name, at, gv[at], wv[at])
				}
			}
		})
	}
}
