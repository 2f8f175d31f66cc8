package frontends

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/kilnml/kiln/ir"
)

// LogicAutomaton is a differentiable logic-gate cellular automaton
// (DiffLogic CA, Miotti et al. 2025) on a Height×Width grid of cells, each
// holding Channels values in [0,1] (bits, once hard). Every step, every
// cell runs the same two logic-gate networks:
//
//   - perception: Kernels small networks, each applied to every channel's
//     3×3 neighbourhood (9 values, row-major, the cell itself at 4). A
//     kernel's first layer has 8 gates, gate i reading the cell and its
//     i-th neighbour; its later layers have KernelLayers[l] gates wired at
//     random within the kernel. A cell perceives Channels·Kernels·last
//     values.
//   - update: a network over the cell's state followed by its perception,
//     with UpdateLayers[l] gates per layer wired at random; the last layer
//     has Channels gates, which are the cell's new state.
//
// The boundary is zero: cells outside the grid read as 0 in every channel.
// The automaton starts from the all-zero grid, so only the boundary breaks
// the symmetry between cells. The parameters (the logits of every gate) are
// the same for every cell and every step; the wiring comes from Seed alone.
type LogicAutomaton struct {
	Height, Width, Channels int
	Steps                   int
	Kernels                 int
	KernelLayers            []int
	UpdateLayers            []int
	// Seed selects the random wiring.
	Seed uint64
	// InitScale is the standard deviation of the logits' initial values
	// (the params' "normal" init).
	InitScale float64
	// PassThrough is added to the logit of gate 3 (a) of every update gate,
	// so that the update network starts close to passing its inputs
	// through (difflogic's residual initialization); 0 adds nothing.
	PassThrough float64
	// Entropy, when positive, adds Entropy times the summed entropy (in
	// nats) of every gate's distribution softmax(logits) to the loss, which
	// pushes the gates towards single gates, as the hard automaton uses;
	// 0 adds nothing.
	Entropy float64
	// ClampState clamps each step's new state to [0,1] in the training
	// graph (clip). The relaxed gates keep values in [0,1] in exact
	// arithmetic, but float32 rounding lets them stray slightly outside,
	// and nearly single gates (xor, xnor, as the Entropy term makes them)
	// amplify the stray through the layers and steps until it overflows.
	// The hard automaton is exact and never clamped.
	ClampState bool
}

// automatonLayer is one layer of an automaton's networks: its param name
// and its wiring.
type automatonLayer struct {
	name string
	wire LogicWiring
}

// Check reports a configuration that cannot be built.
func (a LogicAutomaton) Check() error {
	switch {
	case a.Height < 1 || a.Width < 1 || a.Channels < 1:
		return fmt.Errorf("logic automaton: expected a grid of at least 1×1×1, found %d×%d×%d", a.Height, a.Width, a.Channels)
	case a.Steps < 1:
		return fmt.Errorf("logic automaton: expected at least 1 step, found %d", a.Steps)
	case a.Kernels < 1:
		return fmt.Errorf("logic automaton: expected at least 1 perception kernel, found %d", a.Kernels)
	case len(a.UpdateLayers) == 0 || a.UpdateLayers[len(a.UpdateLayers)-1] != a.Channels:
		return fmt.Errorf("logic automaton: expected update layers ending in %d gates (the channels), found %v", a.Channels, a.UpdateLayers)
	case a.InitScale < 0:
		return fmt.Errorf("logic automaton: expected InitScale >= 0, found %g", a.InitScale)
	case !(a.Entropy >= 0):
		return fmt.Errorf("logic automaton: expected Entropy >= 0, found %g", a.Entropy)
	}
	for _, n := range append(slices.Clone(a.KernelLayers), a.UpdateLayers...) {
		if n < 1 {
			return fmt.Errorf("logic automaton: expected layers of at least 1 gate, found kernel layers %v, update layers %v", a.KernelLayers, a.UpdateLayers)
		}
	}
	return nil
}

// Gates returns the number of gates of the automaton's circuit (each
// perception kernel counted once, though it runs on every channel).
func (a LogicAutomaton) Gates() int {
	n := 8
	for _, g := range a.KernelLayers {
		n += g
	}
	n *= a.Kernels
	for _, g := range a.UpdateLayers {
		n += g
	}
	return n
}

// perception returns the number of values a cell perceives.
func (a LogicAutomaton) perception() int {
	last := 8
	if k := len(a.KernelLayers); k > 0 {
		last = a.KernelLayers[k-1]
	}
	return a.Channels * a.Kernels * last
}

// layers returns the perception layers and the update layers with their
// wiring.
func (a LogicAutomaton) layers() (perceive, update []automatonLayer) {
	rng := rand.New(rand.NewPCG(a.Seed, 0x6c676361))
	// The first perception layer: gate i of each kernel reads the cell (4)
	// and its neighbour i.
	first := LogicWiring{In: 9}
	for range a.Kernels {
		for _, nb := range []int{0, 1, 2, 3, 5, 6, 7, 8} {
			first.A = append(first.A, 4)
			first.B = append(first.B, nb)
		}
	}
	perceive = append(perceive, automatonLayer{"perceive0", first})
	prev := 8
	for l, g := range a.KernelLayers {
		w := LogicWiring{In: a.Kernels * prev}
		for k := range a.Kernels {
			kw := RandomLogicWiring(prev, g, rng)
			for i := range kw.A {
				w.A = append(w.A, k*prev+kw.A[i])
				w.B = append(w.B, k*prev+kw.B[i])
			}
		}
		perceive = append(perceive, automatonLayer{fmt.Sprintf("perceive%d", l+1), w})
		prev = g
	}
	in := a.Channels + a.perception()
	for l, g := range a.UpdateLayers {
		update = append(update, automatonLayer{fmt.Sprintf("update%d", l), RandomLogicWiring(in, g, rng)})
		in = g
	}
	return perceive, update
}

// Target returns the checkerboard of 2×2 squares that channel 0 of the final
// grid is trained towards, row-major [Height, Width]: 1 where
// (i/2 + j/2) is even, else 0.
func (a LogicAutomaton) Target() []float64 {
	t := make([]float64, a.Height*a.Width)
	for i := range a.Height {
		for j := range a.Width {
			if (i/2+j/2)%2 == 0 {
				t[i*a.Width+j] = 1
			}
		}
	}
	return t
}

// rollout builds the Steps steps from the all-zero grid with gate(layer, x)
// for each layer and returns the final grid [Height, Width, Channels].
// The configuration must have passed Check.
func (a LogicAutomaton) rollout(b *Builder, dt ir.DType, clamp bool, gate func(l automatonLayer, update bool, x Value) Value) Value {
	perceive, update := a.layers()
	h, w, c := a.Height, a.Width, a.Channels
	s := b.Const(dt, []int{h, w, c}, 0)
	for range a.Steps {
		p := b.Pad(s, []int{0, 0, 1, 1, 1, 1}, 0) // [h+2, w+2, c], zero boundary
		nb := make([]Value, 0, 9)
		for dy := range 3 {
			row := b.Slice(p, 0, dy, dy+h, 1)
			for dx := range 3 {
				nb = append(nb, b.Slice(row, 1, dx, dx+w, 1))
			}
		}
		x := b.Reshape(b.Stack(3, nb...), h*w, c, 9) // [cells, channel, neighbour]
		for _, l := range perceive {
			x = gate(l, false, x)
		}
		u := b.Concat(1, b.Reshape(s, h*w, c), b.Reshape(x, h*w, a.perception()))
		for _, l := range update {
			u = gate(l, true, u)
		}
		if clamp {
			u = b.Clip(u, 0, 1)
		}
		s = b.Reshape(u, h, w, c)
	}
	return s
}

// Build returns the training graph of the automaton in dtype dt: a param
// LAYER.logits [G,16] per layer (perceive0.., update0..), the rollout of
// Steps steps from the all-zero grid, and one output, loss: the summed
// squared error of channel 0 of the final grid against Target (plus the
// Entropy term).
func (a LogicAutomaton) Build(dt ir.DType) (*ir.Graph, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	b := NewBuilder("logic_automaton")
	var bias Value
	if a.PassThrough != 0 {
		v := make([]float64, 16)
		v[3] = a.PassThrough
		bias = b.Const(dt, []int{16}, v...)
	}
	logits := map[string]Value{}
	var order []Value
	grid := a.rollout(b, dt, a.ClampState, func(l automatonLayer, update bool, x Value) Value {
		lg, ok := logits[l.name]
		if !ok {
			lg = b.ParamInit(l.name+".logits", dt, []int{l.wire.Gates(), 16}, "normal", a.InitScale)
			if update && a.PassThrough != 0 {
				lg = b.Add(lg, bias)
			}
			logits[l.name] = lg
			order = append(order, lg)
		}
		return b.LogicLayer(x, l.wire, lg)
	})
	ch0 := b.Reshape(b.Slice(grid, 2, 0, 1, 1), a.Height, a.Width)
	loss := b.MSELossWith(ch0, b.Const(dt, []int{a.Height, a.Width}, a.Target()...), ReduceSum)
	if a.Entropy > 0 {
		// -Σ p·log p over every gate of every layer, times Entropy.
		var h Value
		for i, lg := range order {
			e := b.Sum(b.Mul(b.Softmax(lg, 1), b.LogSoftmax(lg, 1)), nil, false)
			if i == 0 {
				h = e
			} else {
				h = b.Add(h, e)
			}
		}
		loss = b.Add(loss, b.Mul(h, b.Const(dt, nil, -a.Entropy)))
	}
	b.Output(b.Rename(loss, "loss"))
	return b.Build()
}

// HardGates returns each layer's hard gates from the trained params, by
// layer name: the argmax of LAYER.logits (plus PassThrough on gate 3 of the
// update layers, as the training graph adds it). params maps each param's
// name to its values.
func (a LogicAutomaton) HardGates(params map[string][]float64) (map[string][]int, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	perceive, update := a.layers()
	out := map[string][]int{}
	for i, l := range append(perceive, update...) {
		name := l.name + ".logits"
		v, ok := params[name]
		if !ok {
			return nil, fmt.Errorf("logic automaton: no values for param %s", name)
		}
		if len(v) != 16*l.wire.Gates() {
			return nil, fmt.Errorf("logic automaton: param %s: expected %d values ([%d,16]), found %d", name, 16*l.wire.Gates(), l.wire.Gates(), len(v))
		}
		if i >= len(perceive) && a.PassThrough != 0 {
			v = slices.Clone(v)
			for g := range l.wire.Gates() {
				v[16*g+3] += a.PassThrough
			}
		}
		gates, err := LogicGateArgmax(v)
		if err != nil {
			return nil, fmt.Errorf("param %s: %w", name, err)
		}
		out[l.name] = gates
	}
	return out, nil
}

// BuildHard returns the hard automaton in dtype dt: the same rollout with
// every gate replaced by its hard gate (HardGates), which computes exact
// 0/1 logic. It has no params and one output, grid: the final grid
// [Height, Width, Channels].
func (a LogicAutomaton) BuildHard(dt ir.DType, gates map[string][]int) (*ir.Graph, error) {
	if err := a.Check(); err != nil {
		return nil, err
	}
	perceive, update := a.layers()
	for _, l := range append(perceive, update...) {
		if g, ok := gates[l.name]; !ok || len(g) != l.wire.Gates() {
			return nil, fmt.Errorf("hard logic automaton: expected %d gates for layer %s, found %d", l.wire.Gates(), l.name, len(g))
		}
	}
	b := NewBuilder("logic_automaton_hard")
	grid := a.rollout(b, dt, false, func(l automatonLayer, _ bool, x Value) Value {
		return b.HardLogicLayer(x, l.wire, gates[l.name])
	})
	b.Output(b.Rename(grid, "grid"))
	return b.Build()
}

// Accuracy returns the fraction of cells whose channel 0 in grid
// [Height, Width, Channels] (row-major) rounds to the Target: hard values
// are 0 or 1; a relaxed value counts as 1 above 0.5.
func (a LogicAutomaton) Accuracy(grid []float64) (float64, error) {
	if len(grid) != a.Height*a.Width*a.Channels {
		return 0, fmt.Errorf("logic automaton: expected a grid of %d×%d×%d values, found %d", a.Height, a.Width, a.Channels, len(grid))
	}
	right := 0
	for i, t := range a.Target() {
		v := 0.0
		if grid[i*a.Channels] > 0.5 {
			v = 1
		}
		if v == t {
			right++
		}
	}
	return float64(right) / float64(a.Height*a.Width), nil
}
