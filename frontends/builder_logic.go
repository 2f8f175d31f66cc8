package frontends

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kilnml/kiln/ir"
)

// Logic-gate networks with fixed wiring (difflogic, Petersen et al. 2022):
// a layer of G two-input gates over the last axis of its input, gate g
// reading inputs A[g] and B[g]. Training mixes the 16 gates with softmax
// weights (the logic_gate op); the hard network keeps each gate's most
// likely one and computes exact 0/1 logic.

// LogicWiring is the fixed wiring of one logic-gate layer: over In inputs,
// gate g reads inputs A[g] and B[g] (len(A) == len(B) is the number of
// gates).
type LogicWiring struct {
	In   int
	A, B []int
}

// Gates returns the number of gates of the layer.
func (w LogicWiring) Gates() int { return len(w.A) }

// Check reports a wiring whose index lists differ in length or point
// outside [0, In).
func (w LogicWiring) Check() error {
	if len(w.A) != len(w.B) {
		return fmt.Errorf("logic wiring: expected as many b inputs as a inputs, found %d and %d", len(w.B), len(w.A))
	}
	if len(w.A) == 0 {
		return fmt.Errorf("logic wiring: expected at least one gate, found none")
	}
	for g := range w.A {
		for _, i := range [2]int{w.A[g], w.B[g]} {
			if i < 0 || i >= w.In {
				return fmt.Errorf("logic wiring: gate %d reads input %d, expected an input in [0, %d)", g, i, w.In)
			}
		}
	}
	return nil
}

// RandomLogicWiring returns difflogic's random wiring of gates gates over in
// inputs: the 2·gates input slots take 0, 1, ..., in-1, 0, 1, ... in a
// random order, relabelled by a random permutation of the inputs, so that
// when 2·gates >= in every input is read. The order comes from rng alone.
func RandomLogicWiring(in, gates int, rng *rand.Rand) LogicWiring {
	c := rng.Perm(2 * gates)
	relabel := rng.Perm(in)
	for i := range c {
		c[i] = relabel[c[i]%in]
	}
	return LogicWiring{In: in, A: c[:gates:gates], B: c[gates:]}
}

// logicIndex returns ids as an i32 constant [len(ids)]. Layers with the
// same wiring (a recurrent network's every step) read the constant made
// the first time.
func (b *Builder) logicIndex(ids []int) Value {
	key := fmt.Sprint(ids)
	if v, ok := b.logicIdx[key]; ok {
		return v
	}
	if b.logicIdx == nil {
		b.logicIdx = map[string]Value{}
	}
	v := make([]float64, len(ids))
	for i, id := range ids {
		v[i] = float64(id)
	}
	c := b.Const(ir.I32, []int{len(ids)}, v...)
	b.logicIdx[key] = c
	return c
}

// logicInputs returns the inputs that w's gates read from x [..., w.In]:
// a and b, each [..., G], gathered along the last axis with constant
// indices.
func (b *Builder) logicInputs(x Value, w LogicWiring) (Value, Value, bool) {
	if b.err != nil {
		return Value{b, ir.NoID}, Value{b, ir.NoID}, false
	}
	if err := w.Check(); err != nil {
		b.fail(2, err)
		return Value{b, ir.NoID}, Value{b, ir.NoID}, false
	}
	if s := x.Type().Shape; len(s) == 0 || s[len(s)-1] != w.In {
		b.fail(2, fmt.Errorf("logic layer: expected an input [..., %d] for a wiring over %d inputs, found %s", w.In, w.In, x.Type()))
		return Value{b, ir.NoID}, Value{b, ir.NoID}, false
	}
	return b.IndexSelect(x, b.logicIndex(w.A), -1), b.IndexSelect(x, b.logicIndex(w.B), -1), true
}

// LogicLayer returns the relaxed logic-gate layer over the last axis of x
// [..., w.In]: out[..., g] = logic_gate(x[..., A[g]], x[..., B[g]],
// logits[g]) with logits [G,16], so [..., G]. The wiring is two
// index_selects with constant indices.
func (b *Builder) LogicLayer(x Value, w LogicWiring, logits Value) Value {
	a, y, ok := b.logicInputs(x, w)
	if !ok {
		return Value{b, ir.NoID}
	}
	return b.op(ir.OpLogicGate, nil, a, y, logits)
}

// HardLogicLayer returns the hard logic-gate layer over the last axis of x
// [..., w.In]: gate g computes difflogic's gate gates[g] (0..15, in
// logic_gate's order) of x[..., A[g]] and x[..., B[g]] as
// c0 + c1·a + c2·b + c3·ab with the gate's integer coefficients, which is
// exact 0/1 logic on 0/1 inputs.
func (b *Builder) HardLogicLayer(x Value, w LogicWiring, gates []int) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	if len(gates) != w.Gates() {
		return b.fail(1, fmt.Errorf("hard logic layer: expected %d gate choices for %d gates, found %d", w.Gates(), w.Gates(), len(gates)))
	}
	table := ir.LogicGateCoefficients()
	var c [4][]float64
	for k := range c {
		c[k] = make([]float64, len(gates))
	}
	for g, op := range gates {
		if op < 0 || op >= 16 {
			return b.fail(1, fmt.Errorf("hard logic layer: gate %d is %d, expected a gate in [0, 16)", g, op))
		}
		for k := range c {
			c[k][g] = table[op][k]
		}
	}
	a, y, ok := b.logicInputs(x, w)
	if !ok {
		return Value{b, ir.NoID}
	}
	dt := x.Type().DType
	n := []int{len(gates)}
	out := b.Add(b.Const(dt, n, c[0]...), b.Mul(b.Const(dt, n, c[1]...), a))
	out = b.Add(out, b.Mul(b.Const(dt, n, c[2]...), y))
	return b.Add(out, b.Mul(b.Const(dt, n, c[3]...), b.Mul(a, y)))
}

// LogicGateArgmax returns, for logits [G,16] in row-major order, the most
// likely gate of each row (the first of equal largest logits): the gate the
// hard network keeps. A NaN logit is an error naming the gate.
func LogicGateArgmax(logits []float64) ([]int, error) {
	if len(logits)%16 != 0 {
		return nil, fmt.Errorf("logic gate logits: expected [G,16] (a multiple of 16 values), found %d values", len(logits))
	}
	out := make([]int, len(logits)/16)
	for g := range out {
		row := logits[16*g : 16*g+16]
		best := 0
		for i, v := range row {
			if math.IsNaN(v) {
				return nil, fmt.Errorf("logic gate logits: gate %d has a NaN logit (index %d)", g, i)
			}
			if v > row[best] {
				best = i
			}
		}
		out[g] = best
	}
	return out, nil
}
