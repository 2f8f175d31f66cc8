package tests

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// numericsCase is a graph y = build(params) evaluated at extreme points,
// through the whole pipeline (builder, autodiff, plan, CPU executor), with
// the loss sum(y*r). want computes, in float64 and from the values as
// stored in the dtype under test, the exact y and the gradient of the loss
// for each param.
type numericsCase struct {
	name   string
	dtypes []ir.DType
	build  func(b *frontends.Builder, dt ir.DType) frontends.Value
	feeds  feeds // params and inputs, r included
	labels map[string]bool
	want   func(f feeds) (y []float64, grads map[string][]float64)
}

// numericsLogits are rows where exp overflows without the max shift.
var numericsLogits = []float64{
	1000, -1000, 0,
	1000, 1000, 999,
	-1000, -1000, -999,
}

// numericsShifted returns log_softmax and softmax of the rows of x (c
// columns) by the shifted formula x - m - log(sum(exp(x - m))).
func numericsShifted(x []float64, c int) (lsm, sm []float64) {
	lsm, sm = make([]float64, len(x)), make([]float64, len(x))
	for r := 0; r < len(x); r += c {
		row := x[r : r+c]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(v - m)
		}
		for j, v := range row {
			lsm[r+j] = v - m - math.Log(s)
			sm[r+j] = math.Exp(v-m) / s
		}
	}
	return lsm, sm
}

func numericsSigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

var numericsCases = []numericsCase{
	{
		name: "log_softmax at ±1000",
		build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.LogSoftmax(b.Param("x", dt, 3, 3), -1)
		},
		feeds: feeds{"x": numericsLogits, "r": {1, 2, 3, -1, 0.5, 2, 1, 1, 1}},
		want: func(f feeds) ([]float64, map[string][]float64) {
			// dx = r - softmax * sum(r) per row.
			lsm, sm := numericsShifted(f["x"], 3)
			dx := make([]float64, 9)
			for i := range dx {
				row := i / 3 * 3
				sr := f["r"][row] + f["r"][row+1] + f["r"][row+2]
				dx[i] = f["r"][i] - sm[i]*sr
			}
			return lsm, map[string][]float64{"x": dx}
		},
	},
	{
		name: "softmax_cross_entropy labels at ±1000",
		build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.SoftmaxCrossEntropyWith(b.Param("x", dt, 3, 3), b.Input("lab", ir.I64, 3), frontends.ReduceNone)
		},
		feeds:  feeds{"x": numericsLogits, "lab": {0, 1, 2}, "r": {1, 2, -3}},
		labels: map[string]bool{"lab": true},
		want: func(f feeds) ([]float64, map[string][]float64) {
			// loss[n] = -lsm[n, label]; dx = (softmax - onehot) * r[n].
			lsm, sm := numericsShifted(f["x"], 3)
			y := make([]float64, 3)
			dx := make([]float64, 9)
			for n := range 3 {
				l := int(f["lab"][n])
				y[n] = -lsm[n*3+l]
				for c := range 3 {
					oh := 0.0
					if c == l {
						oh = 1
					}
					dx[n*3+c] = (sm[n*3+c] - oh) * f["r"][n]
				}
			}
			return y, map[string][]float64{"x": dx}
		},
	},
	{
		name: "softmax_cross_entropy mean at ±1000",
		build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.SoftmaxCrossEntropy(b.Param("x", dt, 3, 3), b.Input("lab", ir.I32, 3))
		},
		feeds:  feeds{"x": numericsLogits, "lab": {1, 0, 2}, "r": {1}},
		labels: map[string]bool{"lab": true},
		want: func(f feeds) ([]float64, map[string][]float64) {
			lsm, sm := numericsShifted(f["x"], 3)
			y := 0.0
			dx := make([]float64, 9)
			for n := range 3 {
				l := int(f["lab"][n])
				y -= lsm[n*3+l] / 3
				for c := range 3 {
					dx[n*3+c] = sm[n*3+c] / 3
				}
				dx[n*3+l] -= 1.0 / 3
			}
			return []float64{y}, map[string][]float64{"x": dx}
		},
	},
	{
		name: "softmax_cross_entropy probabilities at ±1000",
		build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.SoftmaxCrossEntropyWith(b.Param("x", dt, 3, 3), b.Param("t", dt, 3, 3), frontends.ReduceNone)
		},
		feeds: feeds{"x": numericsLogits, "t": {0.25, 0.25, 0.5, 0.5, 0.5, 0, 0, 0, 1}, "r": {1, -2, 0.5}},
		want: func(f feeds) ([]float64, map[string][]float64) {
			// loss[n] = -sum t*lsm; dx = (softmax*sum(t) - t)*r[n]; dt = -lsm*r[n].
			lsm, sm := numericsShifted(f["x"], 3)
			t, r := f["t"], f["r"]
			y := make([]float64, 3)
			dx, dt := make([]float64, 9), make([]float64, 9)
			for n := range 3 {
				st := t[n*3] + t[n*3+1] + t[n*3+2]
				for c := range 3 {
					i := n*3 + c
					y[n] -= t[i] * lsm[i]
					dx[i] = (sm[i]*st - t[i]) * r[n]
					dt[i] = -lsm[i] * r[n]
				}
			}
			return y, map[string][]float64{"x": dx, "t": dt}
		},
	},
	{
		name: "sigmoid at ±1000",
		build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Sigmoid(b.Param("x", dt, 3))
		},
		feeds: feeds{"x": {1000, -1000, 0}, "r": {1, 1, 2}},
		want: func(f feeds) ([]float64, map[string][]float64) {
			y := make([]float64, 3)
			dx := make([]float64, 3)
			for i, v := range f["x"] {
				y[i] = numericsSigmoid(v)
				dx[i] = f["r"][i] * numericsSigmoid(v) * numericsSigmoid(-v)
			}
			return y, map[string][]float64{"x": dx}
		},
	},
	{
		name: "bce_with_logits at ±1000",
		build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.BCEWithLogits(b.Param("x", dt, 4), b.Param("t", dt, 4), frontends.ReduceNone)
		},
		feeds: feeds{"x": {1000, -1000, 1000, -1000}, "t": {1, 0, 0, 1}, "r": {1, 2, 3, 4}},
		want: func(f feeds) ([]float64, map[string][]float64) {
			// loss = max(x,0) - x t + log1p(exp(-|x|)); dx = (sigmoid(x) - t) r;
			// dt = -x r.
			y, dx, dt := make([]float64, 4), make([]float64, 4), make([]float64, 4)
			for i, x := range f["x"] {
				t, r := f["t"][i], f["r"][i]
				y[i] = math.Max(x, 0) - x*t + math.Log1p(math.Exp(-math.Abs(x)))
				dx[i] = (numericsSigmoid(x) - t) * r
				dt[i] = -x * r
			}
			return y, map[string][]float64{"x": dx, "t": dt}
		},
	},
	{
		name: "softplus above the threshold and far below",
		build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Op(ir.OpSoftplus, nil, b.Param("x", dt, 6))
		},
		feeds: feeds{"x": {25, 1000, 20, -50, -1000, 1e30}, "r": {1, 1, 1, 1, 1, 1}},
		want: func(f feeds) ([]float64, map[string][]float64) {
			// x > 20: x, slope 1; else log1p(exp(x)), slope sigmoid(x).
			y, dx := make([]float64, 6), make([]float64, 6)
			for i, x := range f["x"] {
				if x > 20 {
					y[i], dx[i] = x, 1
				} else {
					y[i], dx[i] = math.Log1p(math.Exp(x)), numericsSigmoid(x)
				}
			}
			return y, map[string][]float64{"x": dx}
		},
	},
	{
		name:   "log near 0",
		dtypes: []ir.DType{ir.F64},
		build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Log(b.Param("x", dt, 2))
		},
		feeds: feeds{"x": {1e-300, 5e-324}, "r": {1, 1e-30}},
		want: func(f feeds) ([]float64, map[string][]float64) {
			x := f["x"]
			// log(5e-324) = -1074 ln 2 exactly for the smallest subnormal;
			// math.Log misses it on amd64 (golang/go#56600), the kernel
			// does not.
			return []float64{math.Log(x[0]), -1074 * math.Ln2}, map[string][]float64{"x": {1 / x[0], 1e-30 / x[1]}}
		},
	},
	{
		name: "sqrt near 0",
		build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Sqrt(b.Param("x", dt, 1))
		},
		// 1e-40 is subnormal in f32 (stored as 9.99995e-41): the result
		// 1e-20 and the gradient 5e19 are normal.
		feeds: feeds{"x": {1e-40}, "r": {1}},
		want: func(f feeds) ([]float64, map[string][]float64) {
			x := f["x"][0]
			return []float64{math.Sqrt(x)}, map[string][]float64{"x": {0.5 / math.Sqrt(x)}}
		},
	},
	{
		name:   "sqrt near 0 f64",
		dtypes: []ir.DType{ir.F64},
		build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Sqrt(b.Param("x", dt, 1))
		},
		// 1e-300 is 0 in f32, so f64 only.
		feeds: feeds{"x": {1e-300}, "r": {1}},
		want: func(f feeds) ([]float64, map[string][]float64) {
			x := f["x"][0]
			return []float64{math.Sqrt(x)}, map[string][]float64{"x": {0.5 / math.Sqrt(x)}}
		},
	},
}

// TestNumerics runs each case in f32 and f64 and checks that y and every
// gradient are finite and equal to the exact values within rel 1e-12 (f64)
// or 1e-6 (f32) for y and DESIGN.md's gradient bounds (rtol 1e-7 f64, 1e-4
// f32) for the gradients, each measured from the exact value.
func TestNumerics(t *testing.T) {
	for _, c := range numericsCases {
		t.Run(c.name, func(t *testing.T) {
			dts := c.dtypes
			if dts == nil {
				dts = []ir.DType{ir.F64, ir.F32}
			}
			for _, dt := range dts {
				t.Run(dt.String(), func(t *testing.T) { numericsCheck(t, c, dt) })
			}
		})
	}
}

func numericsCheck(t *testing.T, c numericsCase, dt ir.DType) {
	b := frontends.NewBuilder("numerics")
	y := b.Rename(c.build(b, dt), "y")
	r := b.Input("r", dt, y.Type().Shape...)
	b.Output(b.Sum(b.Mul(y, r), nil, false), y)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// The values as stored in dt: the exact answers are for those.
	f := feeds{}
	for k, v := range c.feeds {
		s := append([]float64(nil), v...)
		if dt == ir.F32 && !c.labels[k] {
			for i := range s {
				s[i] = float64(float32(s[i]))
			}
		}
		f[k] = s
	}
	run := newRunner(t, g, kiln.Options{Grad: true})
	run.run(f)
	wantY, wantG := c.want(f)
	valTol, gradTol := tolerance{rtol: 1e-12}, f64Tol
	if dt == ir.F32 {
		valTol, gradTol = tolerance{rtol: 1e-6}, f32Tol
	}
	numericsCompare(t, "y", run.get("y"), wantY, valTol, dt)
	for name, want := range wantG {
		numericsCompare(t, "grad/"+name, run.get("grad/"+name), want, gradTol, dt)
	}
}

// numericsCompare fails unless got is finite (where want is, and
// representable in dt) and within tol of want.
func numericsCompare(t *testing.T, what string, got, want []float64, tol tolerance, dt ir.DType) {
	t.Helper()
	limit := math.MaxFloat64
	if dt == ir.F32 {
		limit = math.MaxFloat32
	}
	for i, w := range want {
		if math.Abs(w) > limit {
			panic(fmt.Sprintf("%s[%d]: the exact value %g does not fit %s; the case is wrong", what, i, w, dt))
		}
		if g := got[i]; math.IsNaN(g) || math.IsInf(g, 0) {
			t.Errorf("%s[%d] = %v, want the finite %.17g", what, i, g, w)
		} else if math.Abs(g-w) > tol.atol+tol.rtol*math.Abs(w) {
			t.Errorf("%s[%d] = %.17g, want %.17g (rtol %g, atol %g)", what, i, g, w, tol.rtol, tol.atol)
		}
	}
}
