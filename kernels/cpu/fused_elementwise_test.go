package cpu

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// fuseewProgram returns the program attribute of the given instructions.
func fuseewProgram(instrs ...string) ir.Attrs {
	l := ir.AttrValue{Kind: ir.AttrList}
	for _, s := range instrs {
		l.L = append(l.L, ir.String(s))
	}
	return ir.MakeAttrs(ir.ProgramAttr, l)
}

// fuseewReference runs prog the unfused way: each instruction through its
// op's own kernel, immediates through the const kernel, as the graph before
// fusion computes them. It returns every instruction's result.
func fuseewReference(t *testing.T, prog ir.EwProgram, in []kernels.Tensor) []kernels.Tensor {
	t.Helper()
	dt := ir.InvalidDType
	for _, x := range in {
		if x.Type.DType != ir.Bool {
			dt = x.Type.DType
			break
		}
	}
	res := make([]kernels.Tensor, len(prog))
	for k, instr := range prog {
		args := make([]kernels.Tensor, len(instr.Args))
		for j, a := range instr.Args {
			switch a.Kind {
			case ir.EwInput:
				args[j] = in[a.Index]
			case ir.EwTemp:
				args[j] = res[a.Index]
			default:
				args[j] = mustRun(t, ir.OpConst, ir.MakeAttrs("value", ir.Float(a.Imm), "dtype", ir.String(dt.String())))
			}
		}
		res[k] = mustRun(t, instr.Op, instr.Attrs, args...)
	}
	return res
}

// fuseewRandom returns a tensor of type ty with random values: bools at
// random, floats uniform in [-2, 2) with some exact zeros and small
// integers, so that comparisons tie and kinks are hit.
func fuseewRandom(r *rand.Rand, ty ir.Type) kernels.Tensor {
	t := emptyOf(ty)
	n := ty.Shape.NumElements()
	vals := make([]float64, n)
	for i := range vals {
		switch {
		case ty.DType == ir.Bool:
			vals[i] = float64(r.IntN(2))
		case r.IntN(8) == 0:
			vals[i] = float64(r.IntN(5) - 2)
		default:
			vals[i] = r.Float64()*4 - 2
		}
	}
	if err := kernels.SetFloat64s(t, vals); err != nil {
		panic(err)
	}
	return t
}

// fuseewCheck runs prog over in as fused_elementwise and checks it bitwise
// against fuseewReference.
func fuseewCheck(t *testing.T, what string, in []kernels.Tensor, instrs ...string) {
	t.Helper()
	attrs := fuseewProgram(instrs...)
	prog, err := ir.EwProgramOf(attrs)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want := fuseewReference(t, prog, in)
	got := mustRun(t, ir.OpFusedElementwise, attrs, in...)
	w := want[len(want)-1]
	if !got.Type.Equal(w.Type) {
		t.Fatalf("%s: fused result %s, unfused %s", what, got.Type, w.Type)
	}
	fuseewSame(t, what, got, w)
}

// fuseewSame checks that got and want hold the same values, bitwise (NaNs
// match).
func fuseewSame(t *testing.T, what string, got, want kernels.Tensor) {
	t.Helper()
	switch got.Type.DType {
	case ir.F32:
		checkEqual(t, what, kernels.View[float32](got), kernels.View[float32](want))
	case ir.F64:
		checkEqual(t, what, kernels.View[float64](got), kernels.View[float64](want))
	default:
		t.Fatalf("%s: unexpected result %s", what, got.Type)
	}
}

// fuseewOpAttrs lists the attribute variants each op is tried with; ops
// not listed take none.
var fuseewOpAttrs = map[ir.Op][]ir.Attrs{
	ir.OpClip: {
		ir.MakeAttrs("min", ir.Float(-0.5), "max", ir.Float(0.7)),
		ir.MakeAttrs("min", ir.Float(-0.5)),
		ir.MakeAttrs("max", ir.Float(0.25)),
	},
	ir.OpPow: {
		ir.MakeAttrs("exponent", ir.Float(2)), ir.MakeAttrs("exponent", ir.Float(3)),
		ir.MakeAttrs("exponent", ir.Float(0.5)), ir.MakeAttrs("exponent", ir.Float(-0.5)),
		ir.MakeAttrs("exponent", ir.Float(-1)), ir.MakeAttrs("exponent", ir.Float(-2)),
		ir.MakeAttrs("exponent", ir.Float(1.7)), nil,
	},
	ir.OpLeakyRelu: {nil, ir.MakeAttrs("alpha", ir.Float(0.2))},
	ir.OpElu:       {nil, ir.MakeAttrs("alpha", ir.Float(0.5))},
	ir.OpGelu:      {nil, ir.MakeAttrs("approximate", ir.String("tanh"))},
	ir.OpGeluGrad:  {nil, ir.MakeAttrs("approximate", ir.String("tanh"))},
	ir.OpSoftplus:  {nil, ir.MakeAttrs("beta", ir.Float(2), "threshold", ir.Float(1))},
}

// TestFusedElementwiseEveryOp runs every elementwise op of the table
// through fused_elementwise, in f32 and f64, and checks each bitwise
// against the op's own kernel: alone on equal shapes, with a broadcast
// operand, with an immediate, and (for bool results) feeding a where. The
// result is 3x700 elements, so blocks of the interpreter split rows.
func TestFusedElementwiseEveryOp(t *testing.T) {
	covered := map[ir.Op]bool{}
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		r := newRand(uint64(dt))
		full := ir.TensorOf(dt, 3, 700)
		row := ir.TensorOf(dt, 700)
		bfull := ir.TensorOf(ir.Bool, 3, 700)
		brow := ir.TensorOf(ir.Bool, 700)
		for _, op := range ir.Ops() {
			info := op.Info()
			if info.Class != ir.ClassElementwise {
				continue
			}
			variants := fuseewOpAttrs[op]
			if variants == nil {
				variants = []ir.Attrs{nil}
			}
			for _, attrs := range variants {
				canon, err := ir.Canonical(op, attrs)
				if err != nil {
					t.Fatal(err)
				}
				arity := len(info.Args) - info.Optional
				if op == ir.OpPow && attrs == nil {
					arity = 2
				}
				instr := func(args ...string) string {
					s := fmt.Sprintf("t0 = %s %s", op, strings.Join(args, ", "))
					if a := canon.String(); a != "" {
						s += " " + a
					}
					return s
				}
				what := fmt.Sprintf("%s%s %s", op, canon, dt)
				switch op {
				case ir.OpGreater, ir.OpGreaterEqual, ir.OpLess, ir.OpLessEqual, ir.OpEqual, ir.OpNotEqual:
					// Bool result: choose with it.
					in := []kernels.Tensor{fuseewRandom(r, full), fuseewRandom(r, row), fuseewRandom(r, full), fuseewRandom(r, full)}
					fuseewCheck(t, what, in, instr("i0", "i1"), "t1 = where t0, i2, i3")
					fuseewCheck(t, what+" immediate", in[:1], instr("i0", "0.0"), "t1 = where t0, i0, 1.5")
					if op == ir.OpEqual || op == ir.OpNotEqual {
						bin := []kernels.Tensor{fuseewRandom(r, bfull), fuseewRandom(r, brow), fuseewRandom(r, full), fuseewRandom(r, row)}
						fuseewCheck(t, what+" bool", bin, instr("i0", "i1"), "t1 = where t0, i2, i3")
					}
				case ir.OpLogicalAnd, ir.OpLogicalOr:
					in := []kernels.Tensor{fuseewRandom(r, bfull), fuseewRandom(r, brow), fuseewRandom(r, full), fuseewRandom(r, full)}
					fuseewCheck(t, what, in, instr("i0", "i1"), "t1 = where t0, i2, i3")
				case ir.OpLogicalNot:
					in := []kernels.Tensor{fuseewRandom(r, bfull), fuseewRandom(r, full), fuseewRandom(r, row)}
					fuseewCheck(t, what, in, instr("i0"), "t1 = where t0, i1, i2")
				case ir.OpWhere:
					in := []kernels.Tensor{fuseewRandom(r, brow), fuseewRandom(r, full), fuseewRandom(r, row)}
					fuseewCheck(t, what, in, instr("i0", "i1", "i2"))
					fuseewCheck(t, what+" immediates", in[:2], instr("i0", "i1", "-0.25"))
					bin := []kernels.Tensor{fuseewRandom(r, bfull), fuseewRandom(r, brow), fuseewRandom(r, bfull), fuseewRandom(r, full), fuseewRandom(r, full)}
					fuseewCheck(t, what+" bool", bin, instr("i0", "i1", "i2"), "t1 = where t0, i3, i4")
				default:
					switch arity {
					case 1:
						in := []kernels.Tensor{fuseewRandom(r, full)}
						fuseewCheck(t, what, in, instr("i0"))
						// A broadcast operand: the row, added to a full tensor.
						in = []kernels.Tensor{fuseewRandom(r, row), fuseewRandom(r, full)}
						fuseewCheck(t, what+" broadcast", in, instr("i0"), "t1 = add t0, i1")
					case 2:
						in := []kernels.Tensor{fuseewRandom(r, full), fuseewRandom(r, full)}
						fuseewCheck(t, what, in, instr("i0", "i1"))
						if op == ir.OpReluGrad || op == ir.OpGeluGrad {
							break // equal shapes only
						}
						in = []kernels.Tensor{fuseewRandom(r, full), fuseewRandom(r, row)}
						fuseewCheck(t, what+" broadcast", in, instr("i0", "i1"))
						fuseewCheck(t, what+" immediate", in[:1], instr("i0", "0.75"))
						fuseewCheck(t, what+" immediate first", in[:1], instr("-1.5", "i0"))
					default:
						t.Fatalf("%s: no case for arity %d", op, arity)
					}
				}
				covered[op] = true
			}
		}
	}
	for _, op := range ir.Ops() {
		if op.Info().Class == ir.ClassElementwise && !covered[op] {
			t.Errorf("elementwise op %s not run through fused_elementwise", op)
		}
	}
}

// TestFusedElementwisePrograms checks longer programs bitwise against the
// unfused kernels: scratch rows reused, bool intermediates, inputs read
// directly, splat from a scalar and gathered from every broadcast pattern,
// results smaller than, equal to and not a multiple of a block, and an
// empty one; then again with every result written by streaming stores (as
// outputs of fuseewStreamBytes or more are), with the AVX2 block runner
// forced where the CPU has AVX-512 (with and without streaming stores),
// and with the SSE2 loops run step by step instead of a block runner.
func TestFusedElementwisePrograms(t *testing.T) {
	chain := []string{"t0 = mul i0, i1", "t1 = add t0, i1", "t2 = tanh t1", "t3 = mul t2, i0", "t4 = sigmoid t3", "t5 = sub t4, i1"}
	tests := []struct {
		name   string
		shapes [][]int
		bools  []bool // which inputs are bool
		prog   []string
	}{
		{"chain equal shapes", [][]int{{4096}, {4096}}, nil, chain},
		{"chain one element", [][]int{{}, {}}, nil, chain},
		{"chain odd size", [][]int{{3, 331}, {3, 331}}, nil, chain},
		{"chain empty", [][]int{{0, 5}, {0, 5}}, nil, chain},
		{"chain scalar and row", [][]int{{}, {5, 300}}, nil, chain},
		{"chain column", [][]int{{700, 1}, {700, 3}}, nil, chain},
		{"outer product", [][]int{{300, 1}, {1, 7}}, nil, chain},
		{"middle axis", [][]int{{2, 1, 400}, {2, 3, 1}}, nil, chain},
		{"bias relu", [][]int{{64, 100}, {100}}, nil, []string{"t0 = add i0, i1", "t1 = relu t0"}},
		{"input used twice", [][]int{{1000}}, nil, []string{"t0 = mul i0, i0", "t1 = mul t0, 0.001"}},
		{"where of comparison", [][]int{{9, 100}, {100}, {9, 100}}, nil, []string{"t0 = greater i0, i1", "t1 = where t0, i2, 0.0"}},
		{"bool input", [][]int{{9, 100}, {9, 100}, {100}}, []bool{false, true}, []string{"t0 = logical_not i1", "t1 = relu i0", "t2 = where t0, t1, i2"}},
		{"mask chain", [][]int{{600}, {600}}, nil, []string{
			"t0 = greater_equal i0, -0.5", "t1 = less_equal i0, 0.5", "t2 = logical_and t0, t1",
			"t3 = where t2, i1, 0.0", "t4 = not_equal i1, i0", "t5 = logical_or t2, t4", "t6 = where t5, t3, i0"}},
		{"adam", [][]int{{64, 64}, {}, {64, 64}, {}, {64, 64}}, nil, []string{
			"t0 = div i0, i1", "t1 = div i2, i3", "t2 = sqrt t1", "t3 = add t2, 1e-08", "t4 = div t0, t3",
			"t5 = mul t4, 0.001", "t6 = sub i4, t5"}},
		{"rank grows", [][]int{{5, 100}, {1, 1, 100}}, nil, []string{"t0 = add i0, i1", "t1 = exp t0"}},
		{"scalar bools", [][]int{{}, {700}, {700}}, []bool{true, true}, []string{"t0 = logical_and i0, i1", "t1 = logical_or i1, i0", "t2 = not_equal t0, t1", "t3 = where t2, i2, 1.0"}},
		{"scalar cond", [][]int{{}, {700}, {}}, []bool{true}, []string{"t0 = where i0, i1, i2", "t1 = where i0, i2, t0"}},
		{"scalar operands", [][]int{{}, {700}}, nil, []string{"t0 = pow i1, i0", "t1 = maximum i0, t0", "t2 = floor_div t1, i0", "t3 = mod i0, t2", "t4 = less i0, t3", "t5 = where t4, t3, i0"}},
	}
	streamBytes := fuseewStreamBytes
	defer func() { fuseewStreamBytes = streamBytes }()
	defer ewUseAVX2(ewAVX2)
	defer func(v bool) { ewAVX512 = v }(ewAVX512)
	for _, mode := range []string{"", " streaming", " AVX2 runner", " AVX2 runner streaming", " SSE2"} {
		name := mode
		switch mode {
		case " streaming":
			fuseewStreamBytes = 0 // every result streamed
		case " AVX2 runner", " AVX2 runner streaming":
			if !ewAVX512 {
				continue // the default runs were these
			}
			ewAVX512 = false // the AVX2 block runner where the CPU has AVX-512
			fuseewStreamBytes = 0
			if mode == " AVX2 runner" {
				fuseewStreamBytes = streamBytes
			}
		case " SSE2":
			if !ewAVX2 {
				continue // the default run was this one
			}
			fuseewStreamBytes = streamBytes
			ewUseAVX2(false) // steps one by one, with the SSE2 loops
		}
		for _, dt := range []ir.DType{ir.F32, ir.F64} {
			r := newRand(7)
			for _, tc := range tests {
				in := make([]kernels.Tensor, len(tc.shapes))
				for i, s := range tc.shapes {
					d := dt
					if i < len(tc.bools) && tc.bools[i] {
						d = ir.Bool
					}
					in[i] = fuseewRandom(r, ir.TensorOf(d, s...))
				}
				fuseewCheck(t, tc.name+" "+dt.String()+name, in, tc.prog...)
			}
		}
	}
}

// TestFusedMatmul checks fused_matmul bitwise against matmul followed by
// the unfused epilogue: batched and broadcast products, vectors, k = 0,
// and a product large enough for gonum to split across goroutines.
func TestFusedMatmul(t *testing.T) {
	tests := []struct {
		name   string
		a, b   []int
		extras [][]int
		prog   []string
	}{
		{"bias relu", []int{32, 64}, []int{64, 10}, [][]int{{10}}, []string{"t0 = add i0, i1", "t1 = relu t0"}},
		{"relu_grad", []int{32, 10}, []int{10, 64}, [][]int{{32, 64}}, []string{"t0 = relu_grad i0, i1"}},
		{"batched", []int{3, 5, 7}, []int{7, 9}, [][]int{{5, 1}}, []string{"t0 = mul i0, i1", "t1 = tanh t0"}},
		{"broadcast batch", []int{2, 1, 4, 6}, []int{3, 6, 5}, [][]int{{5}}, []string{"t0 = sub i0, i1", "t1 = gelu t0 {approximate=\"none\"}"}},
		{"vector", []int{6}, []int{6, 4}, nil, []string{"t0 = sigmoid i0"}},
		{"k zero", []int{4, 0}, []int{0, 3}, [][]int{{3}}, []string{"t0 = add i0, i1"}},
		{"large", []int{200, 300}, []int{300, 250}, [][]int{{250}}, []string{"t0 = add i0, i1", "t1 = relu t0"}},
	}
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		r := newRand(11)
		for _, tc := range tests {
			a := fuseewRandom(r, ir.TensorOf(dt, tc.a...))
			b := fuseewRandom(r, ir.TensorOf(dt, tc.b...))
			var extras []kernels.Tensor
			for _, s := range tc.extras {
				extras = append(extras, fuseewRandom(r, ir.TensorOf(dt, s...)))
			}
			attrs := fuseewProgram(tc.prog...)
			prog, err := ir.EwProgramOf(attrs)
			if err != nil {
				t.Fatal(err)
			}
			product := mustRun(t, ir.OpMatmul, nil, a, b)
			want := fuseewReference(t, prog, append([]kernels.Tensor{product}, extras...))
			got := mustRun(t, ir.OpFusedMatmul, attrs, append([]kernels.Tensor{a, b}, extras...)...)
			fuseewSame(t, tc.name+" "+dt.String(), got, want[len(want)-1])
		}
	}
}

// TestFusedReduce checks fused_reduce bitwise against the unfused program
// followed by sum or mean, over leading, trailing, middle and all axes,
// with and without keepdims, and for an empty input.
func TestFusedReduce(t *testing.T) {
	mul := []string{"t0 = mul i0, i1"}
	tests := []struct {
		name     string
		shapes   [][]int
		prog     []string
		axes     []int // nil: all
		keepdims bool
	}{
		{"leading", [][]int{{50, 300}, {300}}, mul, []int{0}, false},
		{"trailing", [][]int{{50, 300}, {300}}, mul, []int{1}, false},
		{"trailing keepdims", [][]int{{50, 300}, {50, 1}}, mul, []int{-1}, true},
		{"all", [][]int{{7, 333}, {7, 333}}, mul, nil, false},
		{"middle", [][]int{{4, 30, 20}, {20}}, []string{"t0 = sub i0, i1", "t1 = square t0"}, []int{1}, false},
		{"two axes", [][]int{{4, 30, 20}, {4, 30, 20}}, []string{"t0 = mul i0, i1", "t1 = relu t0"}, []int{0, 2}, true},
		{"scalar", [][]int{{}, {}}, mul, nil, false},
		{"empty", [][]int{{0, 4}, {4}}, mul, []int{0}, false},
	}
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		r := newRand(13)
		for _, tc := range tests {
			for _, op := range []ir.Op{ir.OpSum, ir.OpMean} {
				in := make([]kernels.Tensor, len(tc.shapes))
				for i, s := range tc.shapes {
					in[i] = fuseewRandom(r, ir.TensorOf(dt, s...))
				}
				red := ir.MakeAttrs("keepdims", ir.BoolAttr(tc.keepdims))
				if tc.axes != nil {
					red = red.With("axes", ir.Ints(tc.axes...))
				}
				attrs := fuseewProgram(tc.prog...)
				prog, err := ir.EwProgramOf(attrs)
				if err != nil {
					t.Fatal(err)
				}
				x := fuseewReference(t, prog, in)
				want := mustRun(t, op, red, x[len(x)-1])
				for _, a := range red {
					attrs = attrs.With(a.Key, a.Value)
				}
				attrs = attrs.With("op", ir.String(op.String()))
				got := mustRun(t, ir.OpFusedReduce, attrs, in...)
				fuseewSame(t, fmt.Sprintf("%s %s %s", tc.name, op, dt), got, want)
			}
		}
	}
}

// TestFusedRejects checks that the builders refuse programs the
// interpreter does not run: values that are neither the result's dtype nor
// bool.
func TestFusedRejects(t *testing.T) {
	n := node(t, ir.OpFusedElementwise, fuseewProgram("t0 = greater i0, i1", "t1 = where t0, i2, i2"),
		ir.TensorOf(ir.I64, 4), ir.TensorOf(ir.I64, 4), ir.TensorOf(ir.F32, 4))
	if _, err := Kernels.Build(n); err == nil || !strings.Contains(err.Error(), "bool values only") {
		t.Errorf("build with i64 inputs: got %v, want an error about the value types", err)
	}
}
