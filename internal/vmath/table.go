package vmath

import (
	"fmt"
	"math"
	"slices"

	"github.com/kilnml/kiln/ir"
)

// Unary is the row code of a unary float element-wise op: F32 and F64 set
// dst[i] = f(src[i]) for every i < len(dst) (src at least as long, dst may
// be src).
type Unary struct {
	F32 func(dst, src []float32)
	F64 func(dst, src []float64)
}

// Lookup returns the row code of op with attributes a from the table of
// unary float element-wise ops, which the CPU kernels, the fused
// element-wise interpreter and constant folding all read, so that the
// three compute the same bits. ok is false for an op the table does not
// have; err reports an attribute the op does not accept.
//
// The f32 functions of exp, log, tanh, sigmoid, silu, softplus, log1p,
// expm1, erf, gelu, sin and cos are the ones of this package; the other
// ops, and every f64 function, compute in float64 with Go's math (f32
// rounded once), which floor, ceil, round and reciprocal make exact and
// where the rest (rsqrt, log2, log10, elu) are not yet vectorized.
func Lookup(op ir.Op, a ir.Attrs) (u Unary, ok bool, err error) {
	mk, ok := table[op]
	if !ok {
		return Unary{}, false, nil
	}
	u, err = mk(a)
	return u, true, err
}

// Ops returns the ops of the table, in op order: the unary float ops whose
// CPU kernels are built from it.
func Ops() []ir.Op {
	ops := make([]ir.Op, 0, len(table))
	for op := range table {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return ops
}

// table maps each op to the constructor of its row code.
var table = map[ir.Op]func(ir.Attrs) (Unary, error){
	ir.OpExp:        fixed(Exp32, math.Exp),
	ir.OpLog:        fixed(Log32, Log64),
	ir.OpTanh:       fixed(Tanh32, math.Tanh),
	ir.OpSigmoid:    fixed(Sigmoid32, Sigmoid64),
	ir.OpSilu:       fixed(Silu32, func(x float64) float64 { return x * Sigmoid64(x) }),
	ir.OpLog1p:      fixed(Log1p32, math.Log1p),
	ir.OpExpm1:      fixed(Expm1_32, math.Expm1),
	ir.OpRsqrt:      fixed(nil, func(x float64) float64 { return 1 / math.Sqrt(x) }),
	ir.OpReciprocal: fixed(nil, func(x float64) float64 { return 1 / x }),
	ir.OpLog2:       fixed(nil, math.Log2),
	ir.OpLog10:      fixed(nil, Log10_64),
	ir.OpSin:        fixed(Sin32, math.Sin),
	ir.OpCos:        fixed(Cos32, math.Cos),
	ir.OpErf:        fixed(Erf32, math.Erf),
	ir.OpFloor:      fixed(nil, math.Floor),
	ir.OpCeil:       fixed(nil, math.Ceil),
	ir.OpRound:      fixed(nil, math.RoundToEven),
	ir.OpSoftsign:   fixed(nil, func(x float64) float64 { return x / (1 + math.Abs(x)) }),
	ir.OpGelu: func(a ir.Attrs) (Unary, error) {
		switch s := a.Str("approximate", "none"); s {
		case "none":
			return fixed(GeluExact32, GeluExact64)(a)
		case "tanh":
			return fixed(GeluTanh32, GeluTanh64)(a)
		default:
			return Unary{}, fmt.Errorf(`approximate must be "none" or "tanh", found %q`, s)
		}
	},
	ir.OpSoftplus: func(a ir.Attrs) (Unary, error) {
		// The product beta*x and the comparison with the threshold are
		// done in the element type with both attributes rounded to it,
		// as PyTorch does.
		beta, thr := a.Float("beta", 1), a.Float("threshold", 20)
		b32, t32 := float32(beta), float32(thr)
		return Unary{
			F32: func(dst, src []float32) { softplus32(best, b32, t32, dst, src) },
			F64: func(dst, src []float64) {
				for i, v := range src[:len(dst)] {
					if z := v * beta; z > thr {
						dst[i] = v
					} else {
						dst[i] = softplus64(z) / beta
					}
				}
			},
		}, nil
	},
	ir.OpElu: func(a ir.Attrs) (Unary, error) {
		// PyTorch computes alpha*(exp(x) - 1); expm1 is the same value
		// without the cancellation near 0.
		alpha := a.Float("alpha", 1)
		return perElement(func(v float64) float64 {
			if v > 0 {
				return v
			}
			return alpha * math.Expm1(v)
		}), nil
	},
}

// fixed returns the constructor of an op without attributes: f32 is the
// float32 row function, or nil to compute each element by f64 in float64.
func fixed(f32 func(dst, src []float32), f64 func(float64) float64) func(ir.Attrs) (Unary, error) {
	u := perElement(f64)
	if f32 != nil {
		u.F32 = f32
	}
	return func(ir.Attrs) (Unary, error) { return u, nil }
}

// perElement returns the row code computing each element by f in float64,
// f32 rounded once.
func perElement(f func(float64) float64) Unary {
	return Unary{
		F32: func(dst, src []float32) {
			for i, v := range src[:len(dst)] {
				dst[i] = float32(f(float64(v)))
			}
		},
		F64: func(dst, src []float64) {
			for i, v := range src[:len(dst)] {
				dst[i] = f(v)
			}
		},
	}
}

// softplus64 returns log(1 + e^z) as max(z, 0) + log1p(e^-|z|), which
// never overflows and keeps full precision for large negative z.
func softplus64(z float64) float64 {
	return math.Max(z, 0) + math.Log1p(math.Exp(-math.Abs(z)))
}

// Go's math.Log on amd64 (and s390x) is wrong for subnormal arguments
// (golang/go#56600: log(5e-324) gives -709.09, not -744.44), and Log10
// goes through it. Log64 and Log10_64 scale a subnormal argument into the
// normal range first, exactly, by 2^54. f32 values are never subnormal in
// float64, so only f64 needs this.
const (
	minNormal64 = 0x1p-1022 // the smallest normal float64
	subScale64  = 0x1p54    // brings every positive subnormal to a normal value
)

// Log64 is math.Log, correct for subnormal x.
func Log64(x float64) float64 {
	if x > 0 && x < minNormal64 {
		return math.Log(x*subScale64) - 54*math.Ln2
	}
	return math.Log(x)
}

// Log10_64 is math.Log10, correct for subnormal x.
func Log10_64(x float64) float64 {
	if x > 0 && x < minNormal64 {
		return math.Log10(x*subScale64) - 54*(math.Ln2/math.Ln10)
	}
	return math.Log10(x)
}
