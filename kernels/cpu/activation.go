package cpu

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/internal/vmath"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

func init() {
	register(ir.OpLeakyRelu, ir.F32, buildActivation[float32])
	register(ir.OpLeakyRelu, ir.F64, buildActivation[float64])
	register(ir.OpPrelu, ir.F32, buildPrelu[float32])
	register(ir.OpPrelu, ir.F64, buildPrelu[float64])
	register(ir.OpGeluGrad, ir.F32, buildGeluGrad[float32])
	register(ir.OpGeluGrad, ir.F64, buildGeluGrad[float64])
}

// Constants of gelu: sqrt(2/pi) and 0.044715 of the tanh form (PyTorch's
// kBeta and kKappa), 1/sqrt(2) and 1/sqrt(2 pi).
const (
	geluK       = 0.7978845608028654
	geluC       = 0.044715
	geluSqrt1_2 = 0.7071067811865476
	geluInvSqrt = 0.3989422804014327
)

// buildActivation builds leaky_relu (elu, gelu, silu and softplus are
// unary_table.go's), split across the workers when large (parUnary).
func buildActivation[T float](n *kernels.Node) (kernels.Func, error) {
	f, err := activationRow[T](n.Op, n.Attrs)
	if err != nil {
		return nil, err
	}
	return parUnary(n.Par, n.Out.Shape.NumElements(), 1, f), nil
}

// activationRow returns the code of leaky_relu, o[i] = f(x[i]), shared by
// its kernel and the fused elementwise interpreter. The products are done
// in T with alpha rounded to T, as PyTorch does.
func activationRow[T float](op ir.Op, a ir.Attrs) (func(o, x []T), error) {
	if op != ir.OpLeakyRelu {
		return nil, fmt.Errorf("%s is not leaky_relu", op)
	}
	alpha := T(a.Float("alpha", 0.01))
	return func(o, x []T) {
		for i, v := range x {
			if v > 0 {
				o[i] = v
			} else {
				o[i] = v * alpha
			}
		}
	}, nil
}

// geluExactGrad returns gelu'(x) = Phi(x) + x*phi(x) (PyTorch's cdf +
// x*pdf).
func geluExactGrad(x float64) float64 {
	return 0.5*math.Erfc(-x*geluSqrt1_2) + x*geluInvSqrt*math.Exp(-0.5*x*x)
}

// geluTanhGrad returns the derivative of the tanh form: (1 + t)/2 +
// x(1 - t^2)u'/2 with t = tanh(u), u' = sqrt(2/pi)(1 + 3*0.044715 x^2)
// (PyTorch's left_derivative + right_derivative), using (1 + t)/2 =
// sigmoid(2u) and (1 - t^2)/2 = 2 sigmoid(2u) sigmoid(-2u).
func geluTanhGrad(x float64) float64 {
	x2 := x * x
	u := geluK * (x + geluC*x2*x)
	s, sn := vmath.Sigmoid64(2*u), vmath.Sigmoid64(-2*u)
	ss := s * sn
	if ss == 0 {
		return s // also where du overflows
	}
	return s + 2*x*ss*geluK*(1+3*geluC*x2)
}

// buildGeluGrad builds gelu_grad(dy, x): dy*gelu'(x).
func buildGeluGrad[T float](n *kernels.Node) (kernels.Func, error) {
	f, err := activationGeluGradRow[T](n.Attrs)
	if err != nil {
		return nil, err
	}
	return parBinary(n.Par, n.Out.Shape.NumElements(), 2*parCostExp, f), nil
}

// activationGeluGradRow returns the code of gelu_grad {approximate},
// o[i] = dy[i]*gelu'(x[i]), shared by its kernel and the fused elementwise
// interpreter: vmath's vector code for f32, float64 math for f64.
func activationGeluGradRow[T float](a ir.Attrs) (func(o, dy, x []T), error) {
	var d func(float64) float64
	var f32 func(o, dy, x []float32)
	switch s := a.Str("approximate", "none"); s {
	case "none":
		d, f32 = geluExactGrad, vmath.GeluExactGrad32
	case "tanh":
		d, f32 = geluTanhGrad, vmath.GeluTanhGrad32
	default:
		return nil, fmt.Errorf(`approximate must be "none" or "tanh", found %q`, s)
	}
	if f, ok := any(f32).(func(o, dy, x []T)); ok {
		return f, nil
	}
	return func(o, dy, x []T) {
		dy, x = dy[:len(o)], x[:len(o)]
		for i := range o {
			o[i] = T(float64(dy[i]) * d(float64(x[i])))
		}
	}, nil
}

// buildPrelu builds prelu(x, weight): x where x > 0, else weight[c]*x with c
// the index along axis 1 (for rank >= 2 and a weight of C elements) or the
// one weight. The product is taken in T, as PyTorch does. x is walked as
// [outer, C, inner] so the channel is found without division.
func buildPrelu[T float](n *kernels.Node) (kernels.Func, error) {
	xs := n.Args[0].Shape
	c := 1
	if n.Args[1].Shape.NumElements() != 1 {
		c = ir.PReLUChannels(xs)
	}
	total := xs.NumElements()
	if total == 0 {
		return func(kernels.Tensor, []kernels.Tensor) error { return nil }, nil
	}
	inner := 1
	if c != 1 {
		inner = xs[2:].NumElements()
	}
	outer := total / (c * inner)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x, w := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		i := 0
		for range outer {
			for ch := range c {
				wc := w[ch]
				for j := i; j < i+inner; j++ {
					if v := x[j]; v > 0 {
						o[j] = v
					} else {
						o[j] = wc * v
					}
				}
				i += inner
			}
		}
		return nil
	}, nil
}
