package ir

import (
	"math"
	"strings"
	"testing"
)

// fuseewAttrs returns attrs with the program of the given instructions.
func fuseewAttrs(instrs ...string) Attrs {
	l := AttrValue{Kind: AttrList}
	for _, s := range instrs {
		l.L = append(l.L, String(s))
	}
	return MakeAttrs(ProgramAttr, l)
}

// TestEwProgramRoundTrip parses programs and prints them back: the stored
// spelling is the canonical one, immediates included.
func TestEwProgramRoundTrip(t *testing.T) {
	progs := [][]string{
		{"t0 = mul i0, i1", "t1 = tanh t0", "t2 = add t1, 0.5"},
		{"t0 = clip i0 {max=1.0, min=0.0}"},
		{"t0 = greater i0, -1.5", "t1 = where t0, i0, 1e-08"},
		{"t0 = add i0, inf", "t1 = mul t0, -inf", "t2 = sub t1, nan"},
		{"t0 = pow i0 {exponent=2.0}", "t1 = gelu t0 {approximate=\"tanh\"}", "t2 = softplus t1 {beta=1.0, threshold=20.0}"},
		{"t0 = mul i0, i0"},
	}
	for _, instrs := range progs {
		a := fuseewAttrs(instrs...)
		p, err := EwProgramOf(a)
		if err != nil {
			t.Errorf("%q: %v", instrs, err)
			continue
		}
		v, _ := a.Get(ProgramAttr)
		if got := p.Attr(); !got.Equal(v) {
			t.Errorf("%q prints back as %s", instrs, got)
		}
	}
	p, _ := EwProgramOf(fuseewAttrs("t0 = add i0, inf", "t1 = mul t0, -inf", "t2 = sub t1, nan"))
	if p[0].Args[1].Imm != math.Inf(1) || p[1].Args[1].Imm != math.Inf(-1) || !math.IsNaN(p[2].Args[1].Imm) {
		t.Errorf("immediates inf, -inf, nan parse as %v, %v, %v", p[0].Args[1].Imm, p[1].Args[1].Imm, p[2].Args[1].Imm)
	}
}

// TestFusedElementwiseInfer checks the types the fused ops infer and the
// errors that name what is wrong with a program.
func TestFusedElementwiseInfer(t *testing.T) {
	f32 := func(dims ...int) Type { return TensorOf(F32, dims...) }
	b := func(dims ...int) Type { return TensorOf(Bool, dims...) }
	tests := []struct {
		name  string
		op    Op
		attrs Attrs
		args  []Type
		want  Type   // when err is ""
		err   string // a substring of the error
	}{
		{"chain", OpFusedElementwise, fuseewAttrs("t0 = mul i0, i1", "t1 = tanh t0"), []Type{f32(4, 8), f32(8)}, f32(4, 8), ""},
		{"rank grows", OpFusedElementwise, fuseewAttrs("t0 = add i0, i1"), []Type{f32(8), f32(2, 1, 8)}, f32(2, 1, 8), ""},
		{"bool intermediate", OpFusedElementwise, fuseewAttrs("t0 = less i0, 0.0", "t1 = where t0, i1, i0"), []Type{f32(5), f32(3, 5)}, f32(3, 5), ""},
		{"bool result", OpFusedElementwise, fuseewAttrs("t0 = logical_not i0"), []Type{b(3)}, b(3), ""},
		{"f64 immediate", OpFusedElementwise, fuseewAttrs("t0 = mul i1, 2.0", "t1 = where i0, t0, i1"), []Type{b(3), TensorOf(F64, 3)}, TensorOf(F64, 3), ""},
		{"matmul epilogue", OpFusedMatmul, fuseewAttrs("t0 = add i0, i1", "t1 = relu t0"), []Type{f32(4, 6), f32(6, 5), f32(5)}, f32(4, 5), ""},
		{"matmul alone", OpFusedMatmul, fuseewAttrs("t0 = sigmoid i0"), []Type{f32(2, 4, 6), f32(6, 5)}, f32(2, 4, 5), ""},
		{"matmul transposed", OpFusedMatmul, fuseewAttrs("t0 = sigmoid i0").With("transpose_a", BoolAttr(true)), []Type{f32(2, 6, 4), f32(6, 5)}, f32(2, 4, 5), ""},
		{"sum prologue", OpFusedReduce, fuseewAttrs("t0 = mul i0, i1").With("axes", Ints(1)), []Type{f32(4, 8), f32(8)}, f32(4), ""},
		{"mean keepdims", OpFusedReduce, fuseewAttrs("t0 = exp i0").With("op", String("mean")).With("keepdims", BoolAttr(true)), []Type{f32(4, 8)}, f32(1, 1), ""},

		{"no program", OpFusedElementwise, nil, []Type{f32(3)}, Type{}, "needs attribute program"},
		{"empty program", OpFusedElementwise, fuseewAttrs(), []Type{f32(3)}, Type{}, "non-empty list"},
		{"not a string", OpFusedElementwise, MakeAttrs(ProgramAttr, Ints(1)), []Type{f32(3)}, Type{}, "expected an instruction string"},
		{"unknown op", OpFusedElementwise, fuseewAttrs("t0 = frobnicate i0"), []Type{f32(3)}, Type{}, "expected an op name"},
		{"not elementwise", OpFusedElementwise, fuseewAttrs("t0 = softmax i0"), []Type{f32(3)}, Type{}, "softmax is not an elementwise op"},
		{"arity", OpFusedElementwise, fuseewAttrs("t0 = add i0"), []Type{f32(3)}, Type{}, "add takes 2 argument(s)"},
		{"wrong name", OpFusedElementwise, fuseewAttrs("t1 = exp i0"), []Type{f32(3)}, Type{}, "expected the result name t0"},
		{"forward reference", OpFusedElementwise, fuseewAttrs("t0 = add i0, t0"), []Type{f32(3)}, Type{}, "t0 is not defined before instruction t0"},
		{"bad operand", OpFusedElementwise, fuseewAttrs("t0 = add i0, %x"), []Type{f32(3)}, Type{}, "expected an operand"},
		{"missing comma", OpFusedElementwise, fuseewAttrs("t0 = add i0 i1"), []Type{f32(3), f32(3)}, Type{}, "expected end of line"},
		{"not canonical spacing", OpFusedElementwise, fuseewAttrs("t0 = add i0,i1"), []Type{f32(3), f32(3)}, Type{}, "not in canonical form"},
		{"not canonical number", OpFusedElementwise, fuseewAttrs("t0 = add i0, 2"), []Type{f32(3)}, Type{}, `not in canonical form "t0 = add i0, 2.0"`},
		{"attrs not canonical", OpFusedElementwise, fuseewAttrs("t0 = leaky_relu i0"), []Type{f32(3)}, Type{}, "not in canonical form \"t0 = leaky_relu i0 {alpha=0.01}\""},
		{"bad attribute", OpFusedElementwise, fuseewAttrs("t0 = relu i0 {alpha=1.0}"), []Type{f32(3)}, Type{}, "relu takes no attributes"},
		{"input out of range", OpFusedElementwise, fuseewAttrs("t0 = add i0, i2"), []Type{f32(3), f32(3)}, Type{}, "names input 2 of 2"},
		{"unused input", OpFusedElementwise, fuseewAttrs("t0 = exp i0"), []Type{f32(3), f32(3)}, Type{}, "input i1 is not used"},
		{"unused result", OpFusedElementwise, fuseewAttrs("t0 = exp i0", "t1 = tanh i0"), []Type{f32(3)}, Type{}, "t0 is not used"},
		{"type error", OpFusedElementwise, fuseewAttrs("t0 = add i0, i1"), []Type{f32(3), f32(4)}, Type{}, "t0 = add: incompatible shapes"},
		{"immediate without dtype", OpFusedElementwise, fuseewAttrs("t0 = where i0, 1.0, 0.0"), []Type{b(3)}, Type{}, "immediate 1.0 needs an input that is not bool"},
		{"matmul shapes", OpFusedMatmul, fuseewAttrs("t0 = relu i0"), []Type{f32(4, 6), f32(5, 5)}, Type{}, "matmul: inner dimensions differ"},
		{"epilogue too big", OpFusedMatmul, fuseewAttrs("t0 = add i0, i1"), []Type{f32(4, 6), f32(6, 5), f32(3, 4, 5)}, Type{}, "does not fit in the product's buffer"},
		{"epilogue to bool", OpFusedMatmul, fuseewAttrs("t0 = greater i0, 0.0"), []Type{f32(4, 6), f32(6, 5)}, Type{}, "does not fit in the product's buffer"},
		{"reduce op", OpFusedReduce, fuseewAttrs("t0 = exp i0").With("op", String("max")), []Type{f32(3)}, Type{}, `op must be "sum" or "mean"`},
		{"reduce axis", OpFusedReduce, fuseewAttrs("t0 = exp i0").With("axes", Ints(2)), []Type{f32(3)}, Type{}, "axis 2 out of range"},
	}
	for _, tc := range tests {
		g := New("g")
		var args []ID
		for i, ty := range tc.args {
			id, err := g.Leaf(OpInput, "in"+string(rune('a'+i)), ty, nil)
			if err != nil {
				t.Fatal(err)
			}
			args = append(args, id)
		}
		got, _, err := g.Infer(tc.op, tc.attrs, args)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && !got.Equal(tc.want):
			t.Errorf("%s: type %s, want %s", tc.name, got, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
		}
	}
}
