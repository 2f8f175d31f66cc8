package tests

import (
	"context"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// Gradient checks of the shape and data movement ops. Every op here is
// linear in its float arguments, so central differences are exact up to
// rounding and DESIGN.md's bounds hold as they are. Repeated indices are
// constants, so that contributions to one element certainly accumulate.

func init() { gradCases = append(gradCases, movementGradCases...) }

// moveIdx returns a constant i64 index tensor.
func moveIdx(b *frontends.Builder, shape []int, v ...float64) frontends.Value {
	return b.Const(ir.I64, shape, v...)
}

var movementGradCases = []gradCase{
	{name: "squeeze all", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Squeeze(p(b, "a", dt, 2, 1, 3, 1))
	}},
	{name: "squeeze axes", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Squeeze(p(b, "a", dt, 1, 3, 1), 0, 1)
	}},
	{name: "unsqueeze", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Unsqueeze(p(b, "a", dt, 2, 3), 0, -1)
	}},
	{name: "flip two axes", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Flip(p(b, "a", dt, 2, 3, 4), 0, -1)
	}},
	{name: "concat middle of three", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Concat(1, p(b, "a", dt, 2, 1, 3), p(b, "b", dt, 2, 2, 3), p(b, "c", dt, 2, 3, 3))
	}},
	{name: "concat one value twice", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 2, 3)
		return b.Concat(-1, a, b.Tanh(a))
	}},
	{name: "stack middle of three", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Stack(1, p(b, "a", dt, 2, 3), p(b, "b", dt, 2, 3), p(b, "c", dt, 2, 3))
	}},
	{name: "stack scalars last", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Stack(-1, p(b, "a", dt), p(b, "b", dt))
	}},
	{name: "slice step 1", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Slice(p(b, "a", dt, 3, 5), 1, 1, 4, 1)
	}},
	{name: "slice negative bounds", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Slice(p(b, "a", dt, 3, 5), -1, -4, -1, 1)
	}},
	{name: "slice clamped", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Slice(p(b, "a", dt, 4, 2), 0, -10, 10, 1)
	}},
	{name: "slice step 2 middle axis", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Slice(p(b, "a", dt, 2, 7, 2), 1, 1, frontends.SliceToEnd, 2)
	}},
	{name: "slice step 3 past the end", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		// Indices 0, 3, 6 of 8: the adjoint spreads to 9 and crops one.
		return b.Slice(p(b, "a", dt, 8, 2), 0, 0, frontends.SliceToEnd, 3)
	}},
	{name: "slice empty", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 3, 4)
		return b.Add(b.Sum(b.Slice(a, 1, 3, 1, 1), nil, false), b.Sum(b.Mul(a, a), nil, false))
	}},
	{name: "pad with value", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Pad(p(b, "a", dt, 2, 3), []int{1, 2, 0, 1}, 0.5)
	}},
	{name: "pad negative crops", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Pad(p(b, "a", dt, 3, 4), []int{-1, 2, 1, -2}, 0)
	}},
	{name: "gather axis 0 repeated", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		idx := moveIdx(b, []int{4, 3}, 2, 0, 2, 2, 1, 0, 0, 0, 2, 1, 1, 1)
		return b.Gather(p(b, "a", dt, 3, 3), idx, 0)
	}},
	{name: "gather axis 1 smaller index", labels: map[string]int{"i": 4}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Gather(p(b, "a", dt, 3, 4), b.Input("i", ir.I32, 2, 6), -1)
	}},
	{name: "index_select rows repeated", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.IndexSelect(p(b, "a", dt, 4, 3), moveIdx(b, []int{5}, 3, 1, 3, 0, 3), 0)
	}},
	{name: "index_select middle axis", labels: map[string]int{"i": 3}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.IndexSelect(p(b, "a", dt, 2, 3, 2), b.Input("i", ir.I64, 4), 1)
	}},
	{name: "embedding repeated indices", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Embedding(p(b, "t", dt, 5, 3), moveIdx(b, []int{2, 3}, 1, 4, 1, 1, 0, 4))
	}},
	{name: "embedding i32 input", labels: map[string]int{"i": 4}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Embedding(p(b, "t", dt, 4, 2), b.Input("i", ir.I32, 3, 2))
	}},
	{name: "scatter_add x and src", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		idx := moveIdx(b, []int{3, 4}, 0, 2, 2, 1, 2, 2, 0, 1, 0, 2, 2, 1)
		return b.ScatterAdd(p(b, "x", dt, 3, 4), idx, p(b, "s", dt, 3, 4), 0)
	}},
	{name: "scatter_add src larger than index", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		// Only src[:2, :3] is used; the rest of its gradient is zero.
		idx := moveIdx(b, []int{2, 3}, 4, 4, 0, 1, 3, 1)
		return b.ScatterAdd(p(b, "x", dt, 2, 5), idx, p(b, "s", dt, 3, 4), -1)
	}},
	{name: "index_add x and src", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.IndexAdd(p(b, "x", dt, 4, 3), moveIdx(b, []int{5}, 3, 1, 3, 0, 3), p(b, "s", dt, 5, 3), 0)
	}},
	{name: "index_add last axis", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.IndexAdd(p(b, "x", dt, 2, 3), moveIdx(b, []int{2}, 2, 2), p(b, "s", dt, 2, 2), 1)
	}},
	{name: "embedding then gather chain", labels: map[string]int{"i": 6}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		// A small model: look up rows, flip and pad them, and mix with a
		// weight, so the rules compose with each other and with matmul.
		e := b.Embedding(p(b, "t", dt, 6, 4), b.Input("i", ir.I64, 5))
		h := b.Pad(b.Flip(e, 1), []int{1, 0}, 0)
		return b.Matmul(b.Slice(h, 0, 1, frontends.SliceToEnd, 2), p(b, "w", dt, 5, 3))
	}},
}

// TestSecondOrderMovement differentiates the first-order gradient graphs of
// the movement ops, so that the rules of the ops the gradients are made of
// (scatter_add, index_add, gather, index_select, pad, slice, flip) run on
// values that depend on the param, and checks the second derivative
// against central differences of the first, in float64.
func TestSecondOrderMovement(t *testing.T) {
	tests := []struct {
		name  string
		shape []int
		build func(b *frontends.Builder, w frontends.Value) frontends.Value
	}{
		{"gather", []int{3, 2}, func(b *frontends.Builder, w frontends.Value) frontends.Value {
			return b.Gather(w, moveIdx(b, []int{4, 2}, 2, 0, 2, 2, 1, 0, 0, 1), 0)
		}},
		{"index_select", []int{3, 2}, func(b *frontends.Builder, w frontends.Value) frontends.Value {
			return b.IndexSelect(w, moveIdx(b, []int{4}, 1, 1, 0, 1), 1)
		}},
		{"embedding", []int{4, 2}, func(b *frontends.Builder, w frontends.Value) frontends.Value {
			return b.Embedding(w, moveIdx(b, []int{2, 2}, 3, 0, 3, 3))
		}},
		{"scatter_add src", []int{3, 3}, func(b *frontends.Builder, w frontends.Value) frontends.Value {
			x := b.Const(ir.F64, []int{2, 3}, 1, -2, 0.5, 3, 0.25, -1)
			return b.ScatterAdd(x, moveIdx(b, []int{2, 2}, 1, 1, 0, 1), w, 0)
		}},
		{"index_add src", []int{3, 2}, func(b *frontends.Builder, w frontends.Value) frontends.Value {
			x := b.Const(ir.F64, []int{2, 2}, 1, -2, 0.5, 3)
			return b.IndexAdd(x, moveIdx(b, []int{3}, 1, 0, 1), w, 0)
		}},
		{"slice step 3 and pad", []int{8, 2}, func(b *frontends.Builder, w frontends.Value) frontends.Value {
			return b.Pad(b.Slice(w, 0, 1, frontends.SliceToEnd, 3), []int{-1, 2}, 0.5)
		}},
		{"concat stack flip", []int{2, 3}, func(b *frontends.Builder, w frontends.Value) frontends.Value {
			return b.Stack(0, b.Concat(1, w, b.Flip(w, 1)), b.Concat(1, b.Flip(w, 0), w))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := frontends.NewBuilder("second")
			w := b.Param("w", ir.F64, tc.shape...)
			v := tc.build(b, w)
			r := b.Input("r", ir.F64, v.Type().Shape...)
			b.Output(b.Sum(b.Mul(b.Mul(v, v), r), nil, false))
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			if err := passes.Autodiff(g); err != nil {
				t.Fatal(err)
			}
			gw := g.Grads[0].Grad
			e := ir.NewEmitter(g, "s")
			l2 := e.Op(ir.OpSum, ir.MakeAttrs("keepdims", ir.BoolAttr(false)), e.Op(ir.OpMul, nil, gw, gw))
			if e.Err() != nil {
				t.Fatal(e.Err())
			}
			g.Outputs = []ir.ID{l2}
			g.Grads = nil
			if err := passes.DCE(g); err != nil {
				t.Fatal(err)
			}
			if err := ir.Check(g); err != nil {
				t.Fatal(err)
			}
			f := randomFeeds(g, 5, nil, nil)
			checkGrads(t, g, f, f64Tol)
		})
	}
}

// TestMovementIndexOutOfRange runs an embedding whose index is out of range
// through the executor: the step fails with an error naming the op, the
// position, the value and the bound.
func TestMovementIndexOutOfRange(t *testing.T) {
	b := frontends.NewBuilder("oob")
	e := b.Embedding(b.Param("t", ir.F32, 4, 2), b.Input("i", ir.I64, 3))
	b.Output(b.Sum(e, nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, g, kiln.Options{})
	r.set(feeds{"i": {0, 7, 1}})
	err = r.x.Step(context.Background())
	const want = "embedding: indices[1] = 7 is out of range for axis 0 of size 4"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Step = %v, want an error containing %q", err, want)
	}
}
