package tests

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// attnBlock builds loss = sum(y * r) for y = TransformerBlock(x) over x
// [2, T, 8] with 2 heads, causal or not, with a key mask input %keymask
// [2, T] or not; y is the second output.
func attnBlock(t *testing.T, dt ir.DType, n int, causal, keyMask bool) *ir.Graph {
	t.Helper()
	b := frontends.NewBuilder("attn")
	x := b.Input("x", dt, 2, n, 8)
	o := frontends.BlockOptions{Heads: 2, Causal: causal}
	if keyMask {
		o.KeyMask = b.Input("keymask", ir.Bool, 2, n)
	}
	y := b.Rename(b.TransformerBlock("blk", x, o), "y")
	b.Output(b.Sum(b.Mul(y, b.Input("r", dt, 2, n, 8)), nil, false), y)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// attnFeeds draws the feeds of attnBlock's graph; the key mask attends to
// every key of batch 0 and to the first padFrom keys of batch 1 (all of
// them when padFrom is -1).
func attnFeeds(g *ir.Graph, n, padFrom int) feeds {
	f := randomFeeds(g, 5, nil, nil)
	if _, ok := g.Lookup("keymask"); ok {
		km := make([]float64, 2*n)
		for j := range n {
			km[j] = 1
			if padFrom < 0 || j < padFrom {
				km[n+j] = 1
			}
		}
		f["keymask"] = km
	}
	return f
}

// TestAttentionFusedMatchesO0 compiles a transformer block with gradients
// at the default level, where canonicalize makes attention and autodiff
// attention_grad, and at -O0 (matmul, mul, add, softmax, matmul and their
// backward), runs both on the same feeds and compares the loss and every
// param's gradient: within 1e-12 (f64) or 1e-5 (f32) of the largest
// element of the -O0 tensor, T = 70 and 130 cutting the 64-row tiles,
// causal or not, with and without padding.
func TestAttentionFusedMatchesO0(t *testing.T) {
	for _, c := range []struct {
		n              int
		causal, masked bool
		padFrom        int
	}{{70, false, false, 0}, {70, true, false, 0}, {70, false, true, 45}, {130, true, true, 100}} {
		for _, dt := range []ir.DType{ir.F64, ir.F32} {
			t.Run(fmt.Sprintf("T%d causal=%v padded=%v %s", c.n, c.causal, c.masked, dt), func(t *testing.T) {
				g := attnBlock(t, dt, c.n, c.causal, c.masked)
				opts := kiln.Options{Grad: true}
				tg, err := kiln.Transform(g, opts)
				if err != nil {
					t.Fatal(err)
				}
				ops := map[ir.Op]int{}
				for _, v := range tg.Values {
					ops[v.Op]++
				}
				if ops[ir.OpAttention] != 1 || ops[ir.OpAttentionGrad] != 1 || ops[ir.OpSoftmax] != 0 {
					t.Fatalf("attention %d, attention_grad %d, softmax %d; want 1, 1, 0:\n%s", ops[ir.OpAttention], ops[ir.OpAttentionGrad], ops[ir.OpSoftmax], tg.Format())
				}
				o0 := opts
				o0.O0 = true
				fused, plain := newRunner(t, g, opts), newRunner(t, g, o0)
				f := attnFeeds(g, c.n, c.padFrom)
				fused.run(f)
				plain.run(f)
				bound := 1e-12
				if dt == ir.F32 {
					bound = 1e-5
				}
				// The block's output within bound of its largest
				// element; the loss, a sum of y*r with cancellation,
				// within what that bound implies: bound·max|y|·Σ|r|.
				y := plain.get("y")
				attnCompare(t, "y", fused.get("y"), y, bound, 0)
				sumR := 0.0
				for _, v := range f["r"] {
					sumR += math.Abs(v)
				}
				loss := g.Value(g.Outputs[0]).Name
				attnCompare(t, loss, fused.get(loss), plain.get(loss), bound, attnMax(y)*sumR)
				var names []string
				for _, p := range g.Params() {
					names = append(names, "grad/"+g.Value(p).Name)
				}
				for _, name := range names {
					scale := 0.0
					if name == "grad/blk.attn.k.b" {
						// Zero in exact arithmetic (softmax ignores a
						// shift shared by every key): rounding noise on
						// both sides, measured against k.w's gradient.
						scale = attnMax(plain.get("grad/blk.attn.k.w"))
					}
					attnCompare(t, name, fused.get(name), plain.get(name), bound, scale)
				}
			})
		}
	}
}

// attnCompare fails unless |got - want| <= bound·max(max|want|, scale)
// everywhere.
func attnCompare(t *testing.T, what string, got, want []float64, bound, scale float64) {
	t.Helper()
	big := math.Max(attnMax(want), scale)
	for i := range got {
		if !(math.Abs(got[i]-want[i]) <= bound*big) {
			t.Errorf("%s[%d]: fused %v, -O0 %v (bound %g of %g)", what, i, got[i], want[i], bound, big)
			return
		}
	}
}

// TestAttentionFullyMasked checks that a batch whose every key is padding
// gets a finite loss and finite gradients from the fused op (its rows are
// 0), where the -O0 softmax gives NaN.
func TestAttentionFullyMasked(t *testing.T) {
	g := attnBlock(t, ir.F64, 9, true, true)
	f := attnFeeds(g, 9, -1)
	km := f["keymask"]
	for j := 9; j < 18; j++ {
		km[j] = 0
	}
	r := newRunner(t, g, kiln.Options{Grad: true})
	r.run(f)
	for _, name := range append([]string{"grad/blk.attn.q.w", "grad/blk.attn.k.w", "grad/blk.attn.v.w"}, g.Value(g.Outputs[0]).Name) {
		for i, x := range r.get(name) {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%s[%d] = %v with batch 1 fully masked", name, i, x)
			}
		}
	}
	plain := newRunner(t, g, kiln.Options{Grad: true, O0: true})
	plain.run(f)
	if l := plain.get(g.Value(g.Outputs[0]).Name)[0]; !math.IsNaN(l) {
		t.Errorf("-O0 loss %v with batch 1 fully masked; the unfused softmax should give NaN (else this test checks nothing)", l)
	}
}

// TestAttentionWorkersBitwise runs the fused block's forward and backward
// with 1, 2 and 3 workers and requires the same bits.
func TestAttentionWorkersBitwise(t *testing.T) {
	g := attnBlock(t, ir.F32, 70, true, true)
	p, err := kiln.Compile(g, kiln.Options{Grad: true})
	if err != nil {
		t.Fatal(err)
	}
	f := attnFeeds(g, 70, 33)
	var want [][]byte
	names := []string{"grad/blk.attn.q.w", "grad/blk.attn.k.w", "grad/blk.attn.v.w", g.Value(g.Outputs[0]).Name}
	for _, w := range []int{1, 2, 3} {
		x, err := cpu.New(p, cpu.Options{Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		for name, vals := range f {
			tn, _ := x.Get(name)
			if err := kernels.SetFloat64s(tn, vals); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, name := range names {
			tn, err := x.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			got := append([]byte(nil), tn.Data...)
			if w == 1 {
				want = append(want, got)
			} else if !bytes.Equal(got, want[i]) {
				t.Errorf("%s: %d workers differ from 1", name, w)
			}
		}
		x.Close()
	}
}

// attnMax returns the largest |x|.
func attnMax(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = math.Max(m, math.Abs(x))
	}
	return m
}

// TestAttentionCausalExact checks the builder's causal mask: changing the
// input at position 5 leaves the outputs at positions 0..4 bitwise the
// same and changes those at 5.., fused and at -O0.
func TestAttentionCausalExact(t *testing.T) {
	const n, d = 9, 8
	b := frontends.NewBuilder("causal")
	x := b.Input("x", ir.F64, 1, n, d)
	b.Output(b.Attention("attn", x, frontends.AttentionOptions{Heads: 2, Causal: true}))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	y := g.Value(g.Outputs[0]).Name
	for _, o0 := range []bool{false, true} {
		r := newRunner(t, g, kiln.Options{O0: o0})
		f := randomFeeds(g, 2, nil, nil)
		r.run(f)
		before := r.get(y)
		for j := range d {
			f["x"][5*d+j] += 0.5
		}
		r.run(f)
		after := r.get(y)
		for i := range before {
			if same := before[i] == after[i]; same != (i/d < 5) {
				t.Errorf("O0=%v: output %d (position %d) changed=%v after position 5 changed", o0, i, i/d, !same)
			}
		}
	}
}
