package cpu

import (
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestArrayOps runs cumsum and trilu on small tensors in every dtype each
// has (moveVals converts the whole values of the table) and compares with
// results worked out by hand.
func TestArrayOps(t *testing.T) {
	x := moveData([]int{2, 3}, 1, 2, 3, 4, 5, 6)
	y := moveData([]int{2, 2, 3}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	cum := func(kv ...any) ir.Attrs { return ir.MakeAttrs(kv...) }
	tests := []struct {
		name   string
		op     ir.Op
		attrs  ir.Attrs
		x      moveArg
		want   []float64
		dtypes []ir.DType
	}{
		{"cumsum axis 1", ir.OpCumsum, cum("axis", ir.Int(1)), x, []float64{1, 3, 6, 4, 9, 15}, nil},
		{"cumsum axis 0", ir.OpCumsum, cum("axis", ir.Int(0)), x, []float64{1, 2, 3, 5, 7, 9}, nil},
		{"cumsum exclusive", ir.OpCumsum, cum("axis", ir.Int(-1), "exclusive", ir.BoolAttr(true)), x, []float64{0, 1, 3, 0, 4, 9}, nil},
		{"cumsum reverse", ir.OpCumsum, cum("axis", ir.Int(1), "reverse", ir.BoolAttr(true)), x, []float64{6, 5, 3, 15, 11, 6}, nil},
		{"cumsum reverse exclusive", ir.OpCumsum, cum("axis", ir.Int(1), "reverse", ir.BoolAttr(true), "exclusive", ir.BoolAttr(true)), x, []float64{5, 3, 0, 11, 6, 0}, nil},
		{"cumsum middle axis", ir.OpCumsum, cum("axis", ir.Int(1)), y, []float64{1, 2, 3, 5, 7, 9, 7, 8, 9, 17, 19, 21}, nil},
		{"cumsum empty", ir.OpCumsum, cum("axis", ir.Int(0)), moveData([]int{0, 3}), nil, nil},
		{"triu", ir.OpTrilu, nil, y, []float64{1, 2, 3, 0, 5, 6, 7, 8, 9, 0, 11, 12}, allDTypes},
		{"triu k=1", ir.OpTrilu, cum("k", ir.Int(1)), y, []float64{0, 2, 3, 0, 0, 6, 0, 8, 9, 0, 0, 12}, allDTypes},
		{"tril", ir.OpTrilu, cum("upper", ir.BoolAttr(false)), y, []float64{1, 0, 0, 4, 5, 0, 7, 0, 0, 10, 11, 0}, allDTypes},
		{"tril k=-1", ir.OpTrilu, cum("upper", ir.BoolAttr(false), "k", ir.Int(-1)), y, []float64{0, 0, 0, 4, 0, 0, 0, 0, 0, 10, 0, 0}, allDTypes},
		{"triu k past the matrix", ir.OpTrilu, cum("k", ir.Int(5)), x, []float64{0, 0, 0, 0, 0, 0}, allDTypes},
		{"tril k=-5 keeps nothing", ir.OpTrilu, cum("upper", ir.BoolAttr(false), "k", ir.Int(-5)), x, []float64{0, 0, 0, 0, 0, 0}, allDTypes},
	}
	for _, tc := range tests {
		dts := tc.dtypes
		if dts == nil {
			dts = []ir.DType{ir.F32, ir.F64, ir.I32, ir.I64}
		}
		for _, dt := range dts {
			t.Run(tc.name+"/"+dt.String(), func(t *testing.T) {
				out := mustRun(t, tc.op, tc.attrs, tc.x.tensor(dt))
				want := tc.want
				if dt == ir.Bool {
					want = make([]float64, len(tc.want))
					for i, w := range tc.want {
						if w != 0 {
							want[i] = 1
						}
					}
				}
				got := kernels.Float64s(out)
				if len(got) != len(want) {
					t.Fatalf("%d elements, want %d", len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("got %v, want %v", got, want)
					}
				}
			})
		}
	}
}
