package cpu

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// attnRef computes attention and its gradients for one case in float64
// straight from the definition, with the whole [T,S] matrix: the reference
// for the tiled kernels. A row with every score -inf gets 0 and gradient 0.
func attnRef(c attnCase, q, k, v, mask, dy []float64) (y, dq, dk, dv []float64) {
	t, s, dh, dvn := c.t, c.s, c.dh, c.dv
	nh := ir.Shape(c.lead).NumElements()
	y = make([]float64, nh*t*dvn)
	dq, dk, dv = make([]float64, nh*t*dh), make([]float64, nh*s*dh), make([]float64, nh*s*dvn)
	full := append(append(ir.Shape{}, c.lead...), t, s)
	for h := range nh {
		p := make([]float64, t*s)
		for i := range t {
			mx := math.Inf(-1)
			for j := range s {
				x := 0.0
				for e := range dh {
					x += q[(h*t+i)*dh+e] * k[(h*s+j)*dh+e]
				}
				x *= c.scale
				if mask != nil {
					x += mask[bcastIndex(ir.Shape(c.mask), unravel(full, (h*t+i)*s+j))]
				}
				if c.causal && j > i {
					x = math.Inf(-1)
				}
				p[i*s+j] = x
				mx = math.Max(mx, x)
			}
			sum := 0.0
			for j := range s {
				if math.IsInf(mx, -1) {
					p[i*s+j] = 0
					continue
				}
				p[i*s+j] = math.Exp(p[i*s+j] - mx)
				sum += p[i*s+j]
			}
			for j := range s {
				if sum > 0 {
					p[i*s+j] /= sum
				}
			}
		}
		for i := range t {
			for e := range dvn {
				for j := range s {
					y[(h*t+i)*dvn+e] += p[i*s+j] * v[(h*s+j)*dvn+e]
				}
			}
		}
		for i := range t {
			dp := make([]float64, s)
			d := 0.0
			for j := range s {
				for e := range dvn {
					dp[j] += dy[(h*t+i)*dvn+e] * v[(h*s+j)*dvn+e]
				}
				d += p[i*s+j] * dp[j]
			}
			for j := range s {
				ds := p[i*s+j] * (dp[j] - d) * c.scale
				for e := range dh {
					dq[(h*t+i)*dh+e] += ds * k[(h*s+j)*dh+e]
					dk[(h*s+j)*dh+e] += ds * q[(h*t+i)*dh+e]
				}
				for e := range dvn {
					dv[(h*s+j)*dvn+e] += p[i*s+j] * dy[(h*t+i)*dvn+e]
				}
			}
		}
	}
	return y, dq, dk, dv
}

type attnCase struct {
	lead         []int
	t, s, dh, dv int
	scale        float64
	causal       bool
	mask         []int // nil: no mask
	masked       int   // with a mask, every key of the last batch at or past this is -inf (0: none)
}

var attnCases = []attnCase{
	{lead: []int{2, 3}, t: 5, s: 5, dh: 4, dv: 4, scale: 0.5},
	{lead: []int{2, 2}, t: 70, s: 70, dh: 8, dv: 8, scale: 0.35, causal: true},
	{lead: []int{3}, t: 67, s: 131, dh: 5, dv: 3, scale: 0.4},
	{lead: []int{2, 2}, t: 66, s: 66, dh: 4, dv: 4, scale: 0.5, mask: []int{2, 1, 1, 66}, masked: 40},
	{lead: []int{2, 2}, t: 130, s: 130, dh: 4, dv: 6, scale: 0.5, causal: true, mask: []int{2, 1, 1, 130}, masked: 100},
	{lead: []int{2}, t: 9, s: 7, dh: 3, dv: 2, scale: 1, mask: []int{9, 7}},
	// A mask broadcast along the keys (one value a query row), 40 keys.
	{lead: []int{2}, t: 5, s: 40, dh: 3, dv: 2, scale: 0.8, mask: []int{5, 1}},
	// Every key of batch 1 masked: its rows are 0 with gradient 0.
	{lead: []int{2, 1}, t: 3, s: 4, dh: 2, dv: 2, scale: 1, mask: []int{2, 1, 1, 4}, masked: -1},
	{t: 4, s: 6, dh: 3, dv: 2, scale: 0.7, causal: true},
}

func (c attnCase) String() string {
	return fmt.Sprintf("lead%v T%d S%d dh%d dv%d causal=%v mask%v", c.lead, c.t, c.s, c.dh, c.dv, c.causal, c.mask)
}

func (c attnCase) attrs() ir.Attrs {
	return ir.MakeAttrs("scale", ir.Float(c.scale), "causal", ir.BoolAttr(c.causal))
}

// inputs returns random q, k, v, dy and the mask (nil without one).
func (c attnCase) inputs(seed uint64) (q, k, v, mask, dy []float64) {
	r := newRand(seed)
	nh := ir.Shape(c.lead).NumElements()
	q = randVals[float64](r, nh*c.t*c.dh, false)
	k = randVals[float64](r, nh*c.s*c.dh, false)
	v = randVals[float64](r, nh*c.s*c.dv, false)
	dy = randVals[float64](r, nh*c.t*c.dv, false)
	if c.mask != nil {
		ms := ir.Shape(c.mask)
		mask = randVals[float64](r, ms.NumElements(), false)
		if c.masked != 0 && len(ms) == 4 { // [B,1,1,S]: pad the keys of the last batch
			from := max(c.masked, 0)
			for j := from; j < ms[3]; j++ {
				mask[(ms[0]-1)*ms[3]+j] = math.Inf(-1)
			}
		}
	}
	return
}

func (c attnCase) shape(rows, cols int) []int { return append(append([]int{}, c.lead...), rows, cols) }

// attnTensors returns the kernels' arguments in T.
func attnTensors[T float](c attnCase, q, k, v, mask []float64) []kernels.Tensor {
	args := []kernels.Tensor{tensorOf(c.shape(c.t, c.dh), conv[T](q)), tensorOf(c.shape(c.s, c.dh), conv[T](k)), tensorOf(c.shape(c.s, c.dv), conv[T](v))}
	if mask != nil {
		args = append(args, tensorOf(c.mask, conv[T](mask)))
	}
	return args
}

// TestAttention checks attention and attention_grad against the float64
// reference: f64 within 1e-12 relative (plus 1e-13 absolute), f32 within
// 1e-5 (plus 1e-6), for tiles cut and not, causal or not, masks broadcast
// and padded, and a batch whose every key is masked (0 and gradient 0,
// never NaN).
func TestAttention(t *testing.T) {
	for _, c := range attnCases {
		t.Run(c.String(), func(t *testing.T) {
			attnCheck[float64](t, c, 1e-12, 1e-13)
			attnCheck[float32](t, c, 1e-5, 1e-6)
		})
	}
}

func attnCheck[T float](t *testing.T, c attnCase, rel, abs float64) {
	q, k, v, mask, dy := c.inputs(1)
	y, dq, dk, dv := attnRef(c, q, k, v, mask, dy)
	args := attnTensors[T](c, q, k, v, mask)
	out := mustRun(t, ir.OpAttention, c.attrs(), args...)
	checkNear(t, "y", kernels.View[T](out), y, rel, abs)
	gargs := append(args[:3:3], tensorOf(c.shape(c.t, c.dv), conv[T](y)), tensorOf(c.shape(c.t, c.dv), conv[T](dy)))
	if mask != nil {
		gargs = append(gargs, args[3])
	}
	g := kernels.View[T](mustRun(t, ir.OpAttentionGrad, c.attrs(), gargs...))
	dkOff, dvOff, per := ir.AttentionGradSplit(c.t, c.s, c.dh, c.dv)
	var gq, gk, gv []T
	for h := range len(g) / per {
		o := g[h*per : (h+1)*per]
		gq, gk, gv = append(gq, o[:dkOff]...), append(gk, o[dkOff:dvOff]...), append(gv, o[dvOff:]...)
	}
	checkNear(t, "dq", gq, dq, rel, abs)
	checkNear(t, "dk", gk, dk, rel, abs)
	checkNear(t, "dv", gv, dv, rel, abs)
}

// TestAttentionSplitBitwise checks that attention and attention_grad give
// the same bits with 1, 2 and 3 workers.
func TestAttentionSplitBitwise(t *testing.T) {
	for _, c := range attnCases {
		q, k, v, mask, dy := c.inputs(2)
		args := attnTensors[float32](c, q, k, v, mask)
		gargs := append(args[:3:3], tensorOf(c.shape(c.t, c.dv), conv[float32](dy)), tensorOf(c.shape(c.t, c.dv), conv[float32](dy)))
		if mask != nil {
			gargs = append(gargs, args[3])
		}
		var want [2][]byte
		for _, w := range []int{1, 2, 3} {
			for i, op := range []ir.Op{ir.OpAttention, ir.OpAttentionGrad} {
				a := args
				if i == 1 {
					a = gargs
				}
				got := buildWith(t, goPool(w), op, c.attrs(), a...).Data
				if w == 1 {
					want[i] = got
				} else if !bytes.Equal(got, want[i]) {
					t.Errorf("%s %v: %d workers differ from 1", op, c, w)
				}
			}
		}
	}
}

// TestAttentionNaN checks that NaN and +Inf reach exactly the rows that
// softmax then matmul would make NaN: a NaN in query row 1 makes output
// row 1 NaN and no other; a +Inf score (a +Inf key element) makes every
// row NaN; a NaN in dy[2,0] makes dq row 2, all of dk and column 0 of dv
// NaN, and nothing else.
func TestAttentionNaN(t *testing.T) {
	c := attnCase{lead: []int{1}, t: 4, s: 3, dh: 2, dv: 2, scale: 1}
	q, k, v, _, dy := c.inputs(3)
	q[1*c.dh] = math.NaN()
	args := attnTensors[float64](c, q, k, v, nil)
	y := kernels.View[float64](mustRun(t, ir.OpAttention, c.attrs(), args...))
	for i, x := range y {
		if row := i / c.dv; math.IsNaN(x) != (row == 1) {
			t.Errorf("NaN in q row 1: y[%d] (row %d) = %v", i, row, x)
		}
	}
	q, k, v, _, _ = c.inputs(3)
	k[0] = math.Inf(1)
	q[0], q[c.dh], q[2*c.dh], q[3*c.dh] = 1, 1, 1, 1
	y = kernels.View[float64](mustRun(t, ir.OpAttention, c.attrs(), attnTensors[float64](c, q, k, v, nil)...))
	for i, x := range y {
		if !math.IsNaN(x) {
			t.Errorf("+Inf score in every row: y[%d] = %v, want NaN", i, x)
		}
	}
	q, k, v, _, _ = c.inputs(3)
	args = attnTensors[float64](c, q, k, v, nil)
	y = kernels.View[float64](mustRun(t, ir.OpAttention, c.attrs(), args...))
	dy[2*c.dv] = math.NaN()
	g := kernels.View[float64](mustRun(t, ir.OpAttentionGrad, c.attrs(), append(args, tensorOf(c.shape(c.t, c.dv), y), tensorOf(c.shape(c.t, c.dv), dy))...))
	dkOff, dvOff, _ := ir.AttentionGradSplit(c.t, c.s, c.dh, c.dv)
	for i, x := range g {
		want := i < dkOff && i/c.dh == 2 || i >= dkOff && i < dvOff || i >= dvOff && (i-dvOff)%c.dv == 0
		if math.IsNaN(x) != want {
			t.Errorf("NaN in dy[2,0]: packed gradient element %d = %v, want NaN %v", i, x, want)
		}
	}
}

// TestAttentionNaNPassedOver puts a NaN score at key 40 of rows of 64
// keys, where the row maximum's vector lanes pass over a NaN: in a row
// whose other keys are unmasked, and in rows whose other keys are all
// masked (-Inf), which must not be taken for rows with every key masked.
// Every output and gradient element is then NaN (the NaN key's value row
// reaches every output row, and every key's gradient sees a NaN row), in
// f32 and f64.
func TestAttentionNaNPassedOver(t *testing.T) {
	c := attnCase{lead: []int{1}, t: 3, s: 64, dh: 2, dv: 2, scale: 1, mask: []int{3, 64}}
	q, k, v, _, dy := c.inputs(4)
	k[40*c.dh] = math.NaN()
	mask := make([]float64, c.t*c.s)
	for j := range c.s {
		if j != 40 {
			mask[j], mask[2*c.s+j] = math.Inf(-1), math.Inf(-1) // rows 0 and 2
		}
	}
	check := func(dt string, y, g []float64) {
		for i, x := range y {
			if !math.IsNaN(x) {
				t.Errorf("%s: y[%d] = %v, want NaN", dt, i, x)
			}
		}
		for i, x := range g {
			if !math.IsNaN(x) {
				t.Errorf("%s: packed gradient element %d = %v, want NaN", dt, i, x)
			}
		}
	}
	run := func(args []kernels.Tensor, yt, dyt kernels.Tensor) []float64 {
		return kernels.Float64s(mustRun(t, ir.OpAttentionGrad, c.attrs(), append(args[:3:3], yt, dyt, args[3])...))
	}
	a64 := attnTensors[float64](c, q, k, v, mask)
	y64 := mustRun(t, ir.OpAttention, c.attrs(), a64...)
	check("f64", kernels.Float64s(y64), run(a64, y64, tensorOf(c.shape(c.t, c.dv), dy)))
	a32 := attnTensors[float32](c, q, k, v, mask)
	y32 := mustRun(t, ir.OpAttention, c.attrs(), a32...)
	check("f32", kernels.Float64s(y32), run(a32, y32, tensorOf(c.shape(c.t, c.dv), conv[float32](dy))))
}
