package cpu_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	kcpu "github.com/kilnml/kiln/kernels/cpu"
)

// inPlaceAttrs gives, by op name, the attribute sets to run an op with
// where its defaults alone do not make a valid node or do not cover its
// kernels' branches. Every other op runs with its defaults.
var inPlaceAttrs = map[string][]ir.Attrs{
	"clip":       {{{Key: "max", Value: ir.Float(0.5)}, {Key: "min", Value: ir.Float(-0.5)}}, {{Key: "min", Value: ir.Float(0)}}, {{Key: "max", Value: ir.Float(1)}}},
	"pow":        {nil, {{Key: "exponent", Value: ir.Float(2)}}, {{Key: "exponent", Value: ir.Float(0.5)}}},
	"gelu":       {nil, {{Key: "approximate", Value: ir.String("tanh")}}},
	"gelu_grad":  {nil, {{Key: "approximate", Value: ir.String("tanh")}}},
	"leaky_relu": {nil, {{Key: "alpha", Value: ir.Float(0.2)}}},
	// One program for each number of inputs the test tries (1 to 3).
	"fused_elementwise": {
		ir.MakeAttrs(ir.ProgramAttr, ewProgram("t0 = neg i0", "t1 = mul t0, t0")),
		ir.MakeAttrs(ir.ProgramAttr, ewProgram("t0 = mul i0, i1", "t1 = add t0, i0")),
		ir.MakeAttrs(ir.ProgramAttr, ewProgram("t0 = mul i0, i1", "t1 = sub t0, i2", "t2 = tanh t1")),
	},
}

var inPlaceDTypes = []ir.DType{ir.F32, ir.F64, ir.I32, ir.I64, ir.Bool}

// TestElementwiseKernelsRunInPlace runs every op the planner may run in
// place (ir.Op.InPlace: elementwise, no NoInPlace flag) with its result
// over each argument of the same type, alone and together with the other
// arguments of that type, the remaining arguments full-size or broadcast,
// and checks that the result is bit for bit the one computed into separate
// memory. An op it cannot run at all is an error: give it attributes in
// inPlaceAttrs, or flag it NoInPlace in the op table if its kernels cannot
// run in place.
func TestElementwiseKernelsRunInPlace(t *testing.T) {
	full := ir.Shape{4, 6}
	broadcast := []ir.Shape{{6}, {4, 1}, {}}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, op := range ir.Ops() {
		info := op.Info()
		if info.Class != ir.ClassElementwise && !info.ElementwiseKernel {
			continue
		}
		if !op.InPlace() {
			t.Logf("%s: not run in place (%s)", op, info.NoInPlace)
			continue
		}
		attrSets := inPlaceAttrs[op.String()]
		if attrSets == nil {
			attrSets = []ir.Attrs{nil}
		}
		lo, hi := len(info.Args)-info.Optional, len(info.Args)
		if info.Variadic {
			hi = lo + 2
		}
		cases, typed := 0, 0
		for _, raw := range attrSets {
			attrs, err := ir.Canonical(op, raw)
			if err != nil {
				t.Fatalf("%s %v: %v", op, raw, err)
			}
			for n := lo; n <= min(hi, 4); n++ {
				for _, dts := range dtypeTuples(n) {
					for j := range n {
						// The argument j has the result's shape; the others
						// are full-size, then each broadcast in turn.
						shapes := [][]ir.Shape{fill(n, full)}
						for k := range n {
							if k == j {
								continue
							}
							for _, b := range broadcast {
								s := fill(n, full)
								s[k] = b
								shapes = append(shapes, s)
							}
						}
						for _, sh := range shapes {
							types := make([]ir.Type, n)
							for i := range n {
								types[i] = ir.Type{DType: dts[i], Shape: sh[i]}
							}
							out, err := info.Infer(types, attrs)
							if err != nil || !out.Equal(types[j]) {
								continue
							}
							typed++
							ran, err := runInPlace(rng, op, attrs, types, out, j)
							if err != nil {
								t.Errorf("%s %s%v, result over argument %d: %v", op, attrs, types, j, err)
							}
							if ran {
								cases++
							}
						}
					}
				}
			}
		}
		switch {
		case typed == 0:
			t.Logf("%s: no argument has the result's type; never in place", op)
		case cases == 0:
			t.Errorf("%s: no case ran it in place; give it attributes in inPlaceAttrs, or flag it NoInPlace in the op table", op)
		}
	}
}

func fill(n int, s ir.Shape) []ir.Shape {
	out := make([]ir.Shape, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// dtypeTuples returns every assignment of inPlaceDTypes to n arguments.
func dtypeTuples(n int) [][]ir.DType {
	out := [][]ir.DType{{}}
	for range n {
		var next [][]ir.DType
		for _, t := range out {
			for _, d := range inPlaceDTypes {
				next = append(next, append(append([]ir.DType(nil), t...), d))
			}
		}
		out = next
	}
	return out
}

// runInPlace builds the kernel of op for the types and compares its result
// into fresh memory with its results over argument j, and over j and every
// other argument of the same type at once. It reports false when the
// kernel does not exist or refuses the inputs (then there is nothing to
// compare).
func runInPlace(rng *rand.Rand, op ir.Op, attrs ir.Attrs, types []ir.Type, out ir.Type, j int) (bool, error) {
	f, err := kcpu.Kernels.Build(&kernels.Node{Op: op, Attrs: attrs, Args: types, Out: out})
	if err != nil {
		return false, nil
	}
	return compareInPlace(rng, f, types, out, j, op.InPlaceArg)
}

// compareInPlace is runInPlace for the kernel f, whose result may take the
// memory of the arguments k for which may(k) holds.
func compareInPlace(rng *rand.Rand, f kernels.Func, types []ir.Type, out ir.Type, j int, may func(k int) bool) (bool, error) {
	args := make([]kernels.Tensor, len(types))
	for i, ty := range types {
		args[i] = randomTensor(rng, ty)
	}
	if err := f(kernels.New(out), args); err != nil {
		return false, nil
	}
	same := []int{j}
	for k, ty := range types {
		if k != j && ty.Equal(types[j]) && may(k) {
			same = append(same, k)
		}
	}
	overs := [][]int{{j}}
	if len(same) > 1 {
		overs = append(overs, same)
	}
	for _, over := range overs {
		// The shared memory starts out as argument j; the other arguments
		// in over read the same bytes, so their reference values are j's.
		ref := make([]kernels.Tensor, len(args))
		copy(ref, args)
		for _, k := range over {
			ref[k] = args[j]
		}
		want := kernels.New(out)
		if err := f(want, ref); err != nil {
			return false, nil
		}
		got := kernels.New(out)
		copy(got.Data, args[j].Data)
		in := make([]kernels.Tensor, len(args))
		copy(in, ref)
		for _, k := range over {
			in[k] = got
		}
		if err := f(got, in); err != nil {
			return true, fmt.Errorf("in place: %v", err)
		}
		if !bytes.Equal(got.Data, want.Data) {
			return true, fmt.Errorf("over arguments %v: %v, into fresh memory: %v", over, kernels.Float64s(got), kernels.Float64s(want))
		}
	}
	return true, nil
}

func all(int) bool { return true }

// inPlaceFromCases gives, by op name, the attributes and argument types to
// run each op that names arguments it may write over (ir.OpInfo.InPlaceFrom)
// with: one case per number of such arguments, some of the result's type.
var inPlaceFromCases = map[string][]struct {
	attrs ir.Attrs
	args  []ir.Type
}{
	"fused_softmax_grad": {
		// An SGD update as the epilogue: i2 is the param.
		{ir.MakeAttrs(ir.ProgramAttr, ewProgram("t0 = mul i0, i1", "t1 = mul t0, 0.01", "t2 = sub i2, t1")),
			[]ir.Type{ir.TensorOf(ir.F32, 5, 7), ir.TensorOf(ir.F32, 5, 7), ir.TensorOf(ir.F32, 5, 7), ir.TensorOf(ir.F32, 5, 7)}},
		{ir.MakeAttrs(ir.ProgramAttr, ewProgram("t0 = mul i0, i1", "t1 = add t0, i2"), "log", ir.BoolAttr(true)),
			[]ir.Type{ir.TensorOf(ir.F64, 3, 9), ir.TensorOf(ir.F64, 3, 9), ir.TensorOf(ir.F64, 9), ir.TensorOf(ir.F64, 3, 9)}},
	},
}

// ewProgram returns the program attribute value of the instruction lines.
func ewProgram(lines ...string) ir.AttrValue {
	l := make([]ir.AttrValue, len(lines))
	for i, s := range lines {
		l[i] = ir.String(s)
	}
	return ir.AttrValue{Kind: ir.AttrList, L: l}
}

// TestInPlaceFromKernelsRunInPlace runs every op that names arguments its
// result may take (ir.OpInfo.InPlaceFrom) with the result over each such
// argument of the result's type, alone and together with the others, and
// checks that the result is bit for bit the one computed into separate
// memory. An op without cases in inPlaceFromCases is an error.
func TestInPlaceFromKernelsRunInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, op := range ir.Ops() {
		from := op.Info().InPlaceFrom
		if from == 0 {
			continue
		}
		cases := inPlaceFromCases[op.String()]
		if len(cases) == 0 {
			t.Errorf("%s: no case in inPlaceFromCases", op)
		}
		for _, c := range cases {
			attrs, err := ir.Canonical(op, c.attrs)
			if err != nil {
				t.Fatalf("%s %v: %v", op, c.attrs, err)
			}
			out, err := op.Info().Infer(c.args, attrs)
			if err != nil {
				t.Fatalf("%s%v: %v", op, c.args, err)
			}
			f, err := kcpu.Kernels.Build(&kernels.Node{Op: op, Attrs: attrs, Args: c.args, Out: out})
			if err != nil {
				t.Fatalf("%s%v: %v", op, c.args, err)
			}
			ran := 0
			for j := from; j < len(c.args); j++ {
				if !c.args[j].Equal(out) {
					continue
				}
				ok, err := compareInPlace(rng, f, c.args, out, j, op.InPlaceArg)
				if err != nil {
					t.Errorf("%s %s%v, result over argument %d: %v", op, attrs, c.args, j, err)
				}
				if ok {
					ran++
				}
			}
			if ran == 0 {
				t.Errorf("%s %s%v: no argument it may write over ran in place", op, attrs, c.args)
			}
		}
	}
}

// randomTensor returns a tensor of type ty with random elements: floats in
// [-3, 3), nonzero integers in [-5, 5], bools at random.
func randomTensor(rng *rand.Rand, ty ir.Type) kernels.Tensor {
	t := kernels.New(ty)
	n := ty.Shape.NumElements()
	v := make([]float64, n)
	for i := range v {
		switch {
		case ty.DType.IsFloat():
			v[i] = rng.Float64()*6 - 3
		case ty.DType == ir.Bool:
			v[i] = float64(rng.IntN(2))
		default:
			v[i] = float64(rng.IntN(5) + 1)
			if rng.IntN(2) == 0 {
				v[i] = -v[i]
			}
		}
	}
	if err := kernels.SetFloat64s(t, v); err != nil {
		panic(err)
	}
	return t
}

// TestInPlaceCheckCatchesUnsafeKernels shows that the comparison above
// fails a kernel that reads an element after writing another: out[i] =
// x[i] + x[n-1-i] reads x[n-1-i] after writing out[n-1-i] for the second
// half.
func TestInPlaceCheckCatchesUnsafeKernels(t *testing.T) {
	ty := ir.Type{DType: ir.F64, Shape: ir.Shape{8}}
	mirror := func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[float64](out), kernels.View[float64](args[0])
		for i := range o {
			o[i] = x[i] + x[len(x)-1-i]
		}
		return nil
	}
	ran, err := compareInPlace(rand.New(rand.NewPCG(1, 2)), mirror, []ir.Type{ty}, ty, 0, all)
	if !ran || err == nil {
		t.Errorf("compareInPlace = %v, %v; want the mirror kernel caught", ran, err)
	}
	safe := func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[float64](out), kernels.View[float64](args[0])
		for i := range o {
			o[i] = x[i] * x[i]
		}
		return nil
	}
	if ran, err := compareInPlace(rand.New(rand.NewPCG(1, 2)), safe, []ir.Type{ty}, ty, 0, all); !ran || err != nil {
		t.Errorf("compareInPlace of a safe kernel = %v, %v", ran, err)
	}
}
