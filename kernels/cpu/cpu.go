// Package cpu is kiln's CPU backend: a kernel for every non-leaf op of the
// ir op table, written once with generics over the element types.
//
// Every builder checks the node it is given against ir's shape inference,
// precomputes whatever depends on the shapes (coalesced broadcast strides,
// batch offsets, scratch space) and returns a Func that allocates nothing
// per call. A Func assumes its tensors have the node's types, as the
// executor guarantees; it is never called concurrently with itself.
//
// Floating-point results are deterministic: reductions add in a fixed
// order that depends on the shapes alone, in the element type (an f32
// kernel accumulates in float32): a sum along a contiguous run in 16 lanes
// in blocks of 4096 (rowsum.go), a sum down columns and the other
// reductions (losses, norms, var, prod) in index
// order; products are rounded before they are added so that no platform
// fuses them into an FMA. Matmul's order
// is fixed for given shapes: the blocked gemm's FMA chains (gemm.go) where
// its AVX2+FMA micro-kernels run, gonum's BLAS otherwise. Transcendental functions of f32
// values are computed in float64 and rounded once.
package cpu

import (
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Kernels is the CPU backend's registry.
var Kernels = kernels.NewRegistry("cpu")

// float is the set of floating-point element types.
type float interface{ float32 | float64 }

// integer is the set of integer element types (labels, int tensors).
type integer interface{ int32 | int64 }

// number is the set of numeric element types.
type number interface {
	float32 | float64 | int32 | int64
}

func init() {
	for _, op := range []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul} {
		register(op, ir.F32, buildBinary[float32])
		register(op, ir.F64, buildBinary[float64])
		register(op, ir.I32, buildBinary[int32])
		register(op, ir.I64, buildBinary[int64])
	}
	register(ir.OpDiv, ir.F32, buildBinary[float32])
	register(ir.OpDiv, ir.F64, buildBinary[float64])

	register(ir.OpNeg, ir.F32, buildNeg[float32])
	register(ir.OpNeg, ir.F64, buildNeg[float64])
	register(ir.OpNeg, ir.I32, buildNeg[int32])
	register(ir.OpNeg, ir.I64, buildNeg[int64])
	for _, op := range []ir.Op{ir.OpSqrt, ir.OpRelu} {
		register(op, ir.F32, buildUnaryFloat[float32])
		register(op, ir.F64, buildUnaryFloat[float64])
	}
	register(ir.OpReluGrad, ir.F32, buildReluGrad[float32])
	register(ir.OpReluGrad, ir.F64, buildReluGrad[float64])

	register(ir.OpMatmul, ir.F32, buildMatmul[float32])
	register(ir.OpMatmul, ir.F64, buildMatmul[float64])

	registerAll(ir.OpTranspose, buildTranspose[float32], buildTranspose[float64], buildTranspose[int32], buildTranspose[int64], buildTranspose[bool])
	registerAll(ir.OpReshape, buildReshape, buildReshape, buildReshape, buildReshape, buildReshape)
	registerAll(ir.OpBroadcastTo, buildBroadcastTo[float32], buildBroadcastTo[float64], buildBroadcastTo[int32], buildBroadcastTo[int64], buildBroadcastTo[bool])

	register(ir.OpSum, ir.F32, buildReduce[float32])
	register(ir.OpSum, ir.F64, buildReduce[float64])
	register(ir.OpSum, ir.I32, buildReduce[int32])
	register(ir.OpSum, ir.I64, buildReduce[int64])
	register(ir.OpMean, ir.F32, buildReduce[float32])
	register(ir.OpMean, ir.F64, buildReduce[float64])

	for _, op := range []ir.Op{ir.OpSoftmax, ir.OpLogSoftmax} {
		register(op, ir.F32, buildSoftmax[float32])
		register(op, ir.F64, buildSoftmax[float64])
	}
	register(ir.OpSoftmaxCrossEntropy, ir.F32, buildSoftmaxCE[float32])
	register(ir.OpSoftmaxCrossEntropy, ir.F64, buildSoftmaxCE[float64])
	register(ir.OpMSELoss, ir.F32, buildMSE[float32])
	register(ir.OpMSELoss, ir.F64, buildMSE[float64])

	registerAll(ir.OpConst, buildConst, buildConst, buildConst, buildConst, buildConst)
	register(ir.OpOneHot, ir.F32, buildOneHot[float32])
	register(ir.OpOneHot, ir.F64, buildOneHot[float64])
	register(ir.OpOneHot, ir.I32, buildOneHot[int32])
	register(ir.OpOneHot, ir.I64, buildOneHot[int64])
}

// registerAll registers one builder per dtype, in the order f32, f64, i32,
// i64, bool.
func registerAll(op ir.Op, f32, f64, i32, i64, b kernels.Builder) {
	register(op, ir.F32, f32)
	register(op, ir.F64, f64)
	register(op, ir.I32, i32)
	register(op, ir.I64, i64)
	register(op, ir.Bool, b)
}

// register adds b to Kernels for (op, dt), behind the checks of checked.
func register(op ir.Op, dt ir.DType, b kernels.Builder) {
	Kernels.Register(op, dt, checked(op, dt, b))
}

// checked wraps b so that it only ever sees a node that ir's shape inference
// accepts: the right op, arity and result dtype, no negative dimension, and a
// result type equal to the one ir infers from the argument types and
// attributes. Builders can then index shapes without further checks.
func checked(op ir.Op, dt ir.DType, b kernels.Builder) kernels.Builder {
	return func(n *kernels.Node) (kernels.Func, error) {
		if err := kernels.CheckNode(op, dt, n); err != nil {
			return nil, err
		}
		return b(n)
	}
}
