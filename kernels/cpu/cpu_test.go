package cpu

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestEveryOpHasF32Kernel fails when an op is added to ir's table without a
// CPU kernel.
func TestEveryOpHasF32Kernel(t *testing.T) {
	for _, op := range ir.Ops() {
		if op.IsLeaf() {
			continue
		}
		// Comparisons and logical ops produce only bool, argmax and argmin i64.
		if !Kernels.Has(op, ir.F32) && !Kernels.Has(op, ir.Bool) && !Kernels.Has(op, ir.I64) {
			t.Errorf("op %s has no cpu kernel for f32", op)
		}
	}
}

// TestRegisteredDTypes pins the set of (op, dtype) kernels exactly.
func TestRegisteredDTypes(t *testing.T) {
	floats := []ir.DType{ir.F32, ir.F64}
	numeric := []ir.DType{ir.F32, ir.F64, ir.I32, ir.I64}
	want := map[ir.Op][]ir.DType{
		ir.OpAdd: numeric, ir.OpSub: numeric, ir.OpMul: numeric, ir.OpDiv: floats,
		ir.OpNeg: numeric, ir.OpExp: floats, ir.OpLog: floats, ir.OpSqrt: floats, ir.OpTanh: floats,
		ir.OpSigmoid: floats, ir.OpRelu: floats, ir.OpReluGrad: floats,
		ir.OpMatmul: floats, ir.OpTranspose: allDTypes, ir.OpReshape: allDTypes, ir.OpBroadcastTo: allDTypes,
		ir.OpSum: numeric, ir.OpMean: floats,
		ir.OpSoftmax: floats, ir.OpLogSoftmax: floats, ir.OpSoftmaxCrossEntropy: floats, ir.OpMSELoss: floats,
		ir.OpConst: allDTypes, ir.OpOneHot: numeric,

		ir.OpAbs: numeric, ir.OpSign: numeric, ir.OpSquare: numeric, ir.OpRsqrt: floats, ir.OpReciprocal: floats,
		ir.OpLog2: floats, ir.OpLog10: floats, ir.OpLog1p: floats, ir.OpExpm1: floats, ir.OpSin: floats, ir.OpCos: floats,
		ir.OpErf: floats, ir.OpFloor: floats, ir.OpCeil: floats, ir.OpRound: floats, ir.OpClip: numeric, ir.OpPow: floats,
		ir.OpMaximum: numeric, ir.OpMinimum: numeric, ir.OpFloorDiv: numeric, ir.OpMod: numeric,
		ir.OpMax: numeric, ir.OpMin: numeric, ir.OpProd: numeric, ir.OpLogSumExp: floats, ir.OpVar: floats, ir.OpStd: floats,
		ir.OpArgmax: {ir.I64}, ir.OpArgmin: {ir.I64}, ir.OpProdExclusive: floats, ir.OpProdExclusiveGrad: floats,
		ir.OpGreater: {ir.Bool}, ir.OpGreaterEqual: {ir.Bool}, ir.OpLess: {ir.Bool}, ir.OpLessEqual: {ir.Bool},
		ir.OpEqual: {ir.Bool}, ir.OpNotEqual: {ir.Bool}, ir.OpWhere: allDTypes,
		ir.OpLogicalAnd: {ir.Bool}, ir.OpLogicalOr: {ir.Bool}, ir.OpLogicalNot: {ir.Bool},
		ir.OpSqueeze: allDTypes, ir.OpUnsqueeze: allDTypes, ir.OpFlip: allDTypes, ir.OpConcat: allDTypes,
		ir.OpStack: allDTypes, ir.OpSlice: allDTypes, ir.OpPad: allDTypes, ir.OpGather: allDTypes,
		ir.OpIndexSelect: allDTypes, ir.OpEmbedding: allDTypes, ir.OpScatterAdd: numeric, ir.OpIndexAdd: numeric,
		ir.OpBspline: floats, ir.OpLogicGate: floats,
		// Activations and losses (activation.go, loss.go).
		ir.OpLeakyRelu: floats, ir.OpPrelu: floats, ir.OpElu: floats, ir.OpGelu: floats, ir.OpSilu: floats, ir.OpSoftplus: floats, ir.OpGeluGrad: floats,
		ir.OpL1Loss: floats, ir.OpHuberLoss: floats, ir.OpBCELoss: floats, ir.OpBCEWithLogits: floats, ir.OpNLLLoss: floats,
		// Neural-network layers (nn_test.go).
		ir.OpConv1d: floats, ir.OpConv2d: floats, ir.OpConvInputGrad: floats, ir.OpConvWeightGrad: floats,
		ir.OpMaxPool2d: floats, ir.OpMaxPool2dGrad: floats, ir.OpMaxPool2dSelect: floats, ir.OpAvgPool2d: floats, ir.OpAvgPool2dGrad: floats,
		ir.OpLayerNorm: floats, ir.OpLayerNormGrad: floats, ir.OpBatchNorm: floats, ir.OpDropout: floats,
		// Fused patterns (fused_patterns.go).
		ir.OpSoftmaxGrad: floats, ir.OpLogSoftmaxGrad: floats, ir.OpMaxGrad: floats, ir.OpSoftmaxCEGrad: floats,
		// Fused elementwise programs (fused_elementwise.go).
		ir.OpFusedElementwise: floats, ir.OpFusedMatmul: floats, ir.OpFusedReduce: floats,
		// Array ops (cast.go, array.go).
		ir.OpCast: allDTypes, ir.OpCumsum: numeric, ir.OpTrilu: allDTypes,
		// Fused attention (attention.go).
		ir.OpAttention: floats, ir.OpAttentionGrad: floats,
		ir.OpSoftsign: floats,
		// Collectives (dist.go).
		ir.OpAllReduce: floats, ir.OpReduceScatter: floats, ir.OpAllGather: floats, ir.OpShard: floats,
		// Fused softmax (fused_softmax.go).
		ir.OpFusedSoftmax: floats, ir.OpFusedSoftmaxGrad: floats,
	}
	for _, op := range ir.Ops() {
		for _, dt := range allDTypes {
			w := false
			for _, d := range want[op] {
				w = w || d == dt
			}
			if got := Kernels.Has(op, dt); got != w {
				t.Errorf("Has(%s, %s) = %v, want %v", op, dt, got, w)
			}
		}
	}
}

// TestBuildRejectsBadNodes checks that builders refuse nodes that ir's
// inference would not produce instead of panicking later.
func TestBuildRejectsBadNodes(t *testing.T) {
	f32 := func(dims ...int) ir.Type { return ir.TensorOf(ir.F32, dims...) }
	tests := []struct {
		name string
		n    kernels.Node
		want string
	}{
		{"wrong result shape", kernels.Node{Op: ir.OpAdd, Args: []ir.Type{f32(2, 3), f32(3)}, Out: f32(3, 2)}, "does not match"},
		{"too few args", kernels.Node{Op: ir.OpAdd, Args: []ir.Type{f32(2)}, Out: f32(2)}, "takes 2 argument(s)"},
		{"no broadcast", kernels.Node{Op: ir.OpMul, Args: []ir.Type{f32(2), f32(3)}, Out: f32(3)}, "do not broadcast"},
		{"negative dim", kernels.Node{Op: ir.OpBroadcastTo, Attrs: ir.MakeAttrs("shape", ir.Ints(-1)), Args: []ir.Type{f32(1)}, Out: f32(-1)}, "negative"},
		{"matmul inner", kernels.Node{Op: ir.OpMatmul, Args: []ir.Type{f32(2, 3), f32(4, 5)}, Out: f32(2, 5)}, "inner dimensions"},
		{"bad axis", kernels.Node{Op: ir.OpSoftmax, Attrs: ir.MakeAttrs("axis", ir.Int(2)), Args: []ir.Type{f32(2, 3)}, Out: f32(2, 3)}, "out of range"},
		{"i32 const not integral", kernels.Node{Op: ir.OpConst, Attrs: ir.MakeAttrs("dtype", ir.String("i32"), "value", ir.Float(1.5)), Out: ir.TensorOf(ir.I32)}, "not an i32"},
		{"i32 const out of range", kernels.Node{Op: ir.OpConst, Attrs: ir.MakeAttrs("dtype", ir.String("i32"), "value", ir.Float(3e9)), Out: ir.TensorOf(ir.I32)}, "not an i32"},
		{"i64 const out of range", kernels.Node{Op: ir.OpConst, Attrs: ir.MakeAttrs("dtype", ir.String("i64"), "value", ir.Float(1e19)), Out: ir.TensorOf(ir.I64)}, "not an i64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Kernels.Build(&tc.n)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestFuncsDoNotAllocate checks that no Func allocates per call.
func TestFuncsDoNotAllocate(t *testing.T) {
	r := newRand(7)
	f32 := func(dims ...int) kernels.Tensor {
		n := ir.Shape(dims).NumElements()
		return tensorOf(dims, randVals[float32](r, n, false))
	}
	pos := f32(4, 5)
	for i, v := range kernels.View[float32](pos) {
		kernels.View[float32](pos)[i] = v*v + 0.5
	}
	labels := tensorOf([]int{4}, []int32{0, 3, 1, 2})
	tests := []allocCase{
		{ir.OpAdd, nil, []kernels.Tensor{f32(4, 5), f32(4, 5)}},
		{ir.OpSub, nil, []kernels.Tensor{f32(4, 5), f32(5)}},
		{ir.OpMul, nil, []kernels.Tensor{f32(), f32(4, 5)}},
		{ir.OpDiv, nil, []kernels.Tensor{f32(2, 3, 4), f32(3, 1)}},
		{ir.OpNeg, nil, []kernels.Tensor{f32(4, 5)}},
		{ir.OpExp, nil, []kernels.Tensor{f32(4, 5)}},
		{ir.OpLog, nil, []kernels.Tensor{pos}},
		{ir.OpSqrt, nil, []kernels.Tensor{pos}},
		{ir.OpTanh, nil, []kernels.Tensor{f32(4, 5)}},
		{ir.OpSigmoid, nil, []kernels.Tensor{f32(4, 5)}},
		{ir.OpRelu, nil, []kernels.Tensor{f32(4, 5)}},
		{ir.OpReluGrad, nil, []kernels.Tensor{f32(4, 5), f32(4, 5)}},
		{ir.OpMatmul, nil, []kernels.Tensor{f32(2, 1, 3, 4), f32(5, 4, 6)}},
		{ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(2, 0, 1)), []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(5, -1)), []kernels.Tensor{f32(4, 5)}},
		{ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(2, 4, 5)), []kernels.Tensor{f32(4, 1)}},
		{ir.OpSum, ir.MakeAttrs("axes", ir.Ints(0, 2)), []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpMean, nil, []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpSoftmax, nil, []kernels.Tensor{f32(4, 5)}},
		{ir.OpLogSoftmax, ir.MakeAttrs("axis", ir.Int(0)), []kernels.Tensor{f32(4, 5)}},
		{ir.OpSoftmaxCrossEntropy, nil, []kernels.Tensor{f32(4, 5), labels}},
		{ir.OpMSELoss, nil, []kernels.Tensor{f32(4, 5), f32(5)}},
		{ir.OpConst, ir.MakeAttrs("shape", ir.Ints(2, 2), "value", ir.Floats(1, 2, 3, 4)), nil},
		{ir.OpOneHot, ir.MakeAttrs("classes", ir.Int(5)), []kernels.Tensor{labels}},
	}
	checkNoAllocs(t, tests)
}

// TestEmptyAndScalarShapes runs every op on zero-size and rank-0 shapes that
// ir's inference accepts; none may panic.
func TestEmptyAndScalarShapes(t *testing.T) {
	f32 := func(dims ...int) kernels.Tensor {
		return tensorOf[float32](dims, make([]float32, ir.Shape(dims).NumElements()))
	}
	tests := []allocCase{
		{ir.OpAdd, nil, []kernels.Tensor{f32(0, 3), f32(3)}},
		{ir.OpAdd, nil, []kernels.Tensor{f32(), f32()}},
		{ir.OpSub, nil, []kernels.Tensor{f32(2, 0), f32(2, 1)}},
		{ir.OpMul, nil, []kernels.Tensor{f32(1, 0), f32(5, 1)}},
		{ir.OpDiv, nil, []kernels.Tensor{f32(), f32(0)}},
		{ir.OpNeg, nil, []kernels.Tensor{f32(0)}},
		{ir.OpExp, nil, []kernels.Tensor{f32()}},
		{ir.OpLog, nil, []kernels.Tensor{f32(3, 0)}},
		{ir.OpSqrt, nil, []kernels.Tensor{f32(0, 2)}},
		{ir.OpTanh, nil, []kernels.Tensor{f32(0, 0)}},
		{ir.OpSigmoid, nil, []kernels.Tensor{f32()}},
		{ir.OpRelu, nil, []kernels.Tensor{f32(0)}},
		{ir.OpReluGrad, nil, []kernels.Tensor{f32(), f32()}},
		{ir.OpMatmul, nil, []kernels.Tensor{f32(0, 3), f32(3, 4)}},
		{ir.OpMatmul, nil, []kernels.Tensor{f32(2, 0), f32(0, 3)}},
		{ir.OpMatmul, nil, []kernels.Tensor{f32(0), f32(0)}},
		{ir.OpMatmul, nil, []kernels.Tensor{f32(2, 3), f32(3, 0)}},
		{ir.OpMatmul, nil, []kernels.Tensor{f32(0, 2, 3), f32(3, 4)}},
		{ir.OpMatmul, nil, []kernels.Tensor{f32(1, 2, 0), f32(4, 0, 3)}},
		{ir.OpTranspose, nil, []kernels.Tensor{f32()}},
		{ir.OpTranspose, nil, []kernels.Tensor{f32(2, 0, 3)}},
		{ir.OpReshape, ir.MakeAttrs("shape", ir.Ints()), []kernels.Tensor{f32(1, 1)}},
		{ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(0, 5)), []kernels.Tensor{f32(5, 0)}},
		{ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(2, 0, 3)), []kernels.Tensor{f32(0, 3)}},
		{ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints()), []kernels.Tensor{f32()}},
		{ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(0)), []kernels.Tensor{f32()}},
		{ir.OpSum, nil, []kernels.Tensor{f32()}},
		{ir.OpSum, ir.MakeAttrs("axes", ir.Ints(1)), []kernels.Tensor{f32(3, 0)}},
		{ir.OpSum, ir.MakeAttrs("axes", ir.Ints(0)), []kernels.Tensor{f32(3, 0)}},
		{ir.OpMean, nil, []kernels.Tensor{f32(0)}},
		{ir.OpMean, ir.MakeAttrs("axes", ir.Ints(0), "keepdims", ir.BoolAttr(true)), []kernels.Tensor{f32(0, 4)}},
		{ir.OpSoftmax, nil, []kernels.Tensor{f32(0, 3)}},
		{ir.OpSoftmax, ir.MakeAttrs("axis", ir.Int(0)), []kernels.Tensor{f32(0, 3)}},
		{ir.OpLogSoftmax, nil, []kernels.Tensor{f32(3, 0)}},
		{ir.OpSoftmaxCrossEntropy, nil, []kernels.Tensor{f32(0, 3), tensorOf[int32]([]int{0}, nil)}},
		{ir.OpMSELoss, nil, []kernels.Tensor{f32(0), f32()}},
		{ir.OpMSELoss, nil, []kernels.Tensor{f32(), f32()}},
		{ir.OpConst, ir.MakeAttrs("shape", ir.Ints(0, 2), "value", ir.Float(1)), nil},
		{ir.OpConst, ir.MakeAttrs("shape", ir.Ints(0), "value", ir.Floats()), nil},
		{ir.OpOneHot, ir.MakeAttrs("classes", ir.Int(3)), []kernels.Tensor{tensorOf[int64]([]int{0}, nil)}},
		{ir.OpOneHot, ir.MakeAttrs("classes", ir.Int(3)), []kernels.Tensor{tensorOf([]int{}, []int64{2})}},
	}
	for _, tc := range tests {
		t.Run(tc.op.String(), func(t *testing.T) {
			out := mustRun(t, tc.op, tc.attrs, tc.args...)
			if out.Type.Shape.NumElements() == 0 {
				return
			}
			switch tc.op {
			case ir.OpMean, ir.OpSoftmaxCrossEntropy, ir.OpMSELoss:
				// Means of nothing are NaN (0/0), as in NumPy.
				for _, v := range kernels.View[float32](out) {
					if tc.args[0].Type.Shape.NumElements() == 0 && v == v {
						t.Errorf("mean of no elements = %v, want NaN", v)
					}
				}
			}
		})
	}
}
