package passes

import (
	"github.com/kilnml/kiln/internal/golden"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilnml/kiln/ir"
)

// TestFusePatternsGolden runs the pattern fusions (or, for canon_*.kir, the
// canonicalize pass) over every graph in testdata/fusepat and compares the
// result with NAME.golden (go test ./passes -run TestFusePatternsGolden
// -update rewrites them). The inputs are graphs as autodiff emits them,
// some edited to the forms simplification may leave (operands swapped,
// constants folded) and some that must not fuse (an interior value used
// elsewhere, a sum over another axis). Every result must pass ir.Check and
// parse back to the same text.
func TestFusePatternsGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "fusepat", "*.kir"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".kir")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			g, err := ir.Parse(file, src)
			if err != nil {
				t.Fatal(err)
			}
			if err := ir.Check(g); err != nil {
				t.Fatalf("input: %v", err)
			}
			pass := fusePatterns
			if strings.HasPrefix(name, "canon_") {
				pass = Canonicalize
			}
			if err := pass(g); err != nil {
				t.Fatal(err)
			}
			if err := ir.Check(g); err != nil {
				t.Fatalf("after the pass: %v\n%s", err, g.Format())
			}
			got := g.Format()
			back, err := ir.Parse("golden", []byte(got))
			if err != nil {
				t.Fatalf("the result does not parse: %v\n%s", err, got)
			}
			if b := back.Format(); b != got {
				t.Errorf("the result does not round-trip:\n%s", cmp.Diff(got, b))
			}
			goldenPath := filepath.Join("testdata", "fusepat", name+".golden")
			if golden.Update() {
				if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), got); d != "" {
				t.Errorf("%s differs from %s (-want +got; -update rewrites it):\n%s", file, goldenPath, d)
			}
		})
	}
}

// TestFusePatternsMatches checks which fused ops each testdata graph ends
// with, so that a golden file rewritten with -update cannot silently lose a
// fusion.
func TestFusePatternsMatches(t *testing.T) {
	tests := []struct {
		name string
		want map[ir.Op]int
	}{
		{"softmax_grad", map[ir.Op]int{ir.OpSoftmaxGrad: 1}},
		{"softmax_grad_simplified", map[ir.Op]int{ir.OpSoftmaxGrad: 1}},
		{"softmax_grad_no_match", nil},
		{"log_softmax_grad", map[ir.Op]int{ir.OpLogSoftmaxGrad: 1}},
		{"max_grad", map[ir.Op]int{ir.OpMaxGrad: 1}},
		{"max_grad_all", map[ir.Op]int{ir.OpMaxGrad: 1}},
		{"min_grad_keepdims", map[ir.Op]int{ir.OpMaxGrad: 1}},
		{"max_grad_shared_mask", nil},
		{"max_grad_scalar_dy", map[ir.Op]int{ir.OpMaxGrad: 1}},
		{"softmax_ce_unscaled", map[ir.Op]int{ir.OpSoftmaxCEGrad: 1}},
		{"softmax_ce_labels", map[ir.Op]int{ir.OpSoftmaxCEGrad: 1}},
		{"softmax_ce_probs", map[ir.Op]int{ir.OpSoftmaxCEGrad: 1}},
		{"softmax_ce_none", map[ir.Op]int{ir.OpSoftmaxCEGrad: 1}},
		{"softmax_ce_folded", map[ir.Op]int{ir.OpSoftmaxCEGrad: 1}},
		{"softmax_ce_shared_softmax", nil},
		{"canon_nll", map[ir.Op]int{ir.OpSoftmaxCrossEntropy: 2, ir.OpNLLLoss: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", "fusepat", tc.name+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			g, err := ir.Parse(tc.name, src)
			if err != nil {
				t.Fatal(err)
			}
			got := map[ir.Op]int{}
			for _, v := range g.Values {
				switch v.Op {
				case ir.OpSoftmaxGrad, ir.OpLogSoftmaxGrad, ir.OpMaxGrad, ir.OpSoftmaxCEGrad:
					got[v.Op]++
				case ir.OpSoftmaxCrossEntropy, ir.OpNLLLoss:
					if strings.HasPrefix(tc.name, "canon_") {
						got[v.Op]++
					}
				}
			}
			for _, op := range []ir.Op{ir.OpSoftmaxGrad, ir.OpLogSoftmaxGrad, ir.OpMaxGrad, ir.OpSoftmaxCEGrad} {
				for _, id := range g.IDsOf(op) {
					if from, ok := g.Value(id).Attrs.Get(ir.FromAttr); !ok || len(from.L) < 3 {
						t.Errorf("%s records no group in %s", g.FormatValue(id), ir.FromAttr)
					}
				}
			}
			if tc.want == nil {
				tc.want = map[ir.Op]int{}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("fused ops (-want +got):\n%s", d)
			}
		})
	}
}
