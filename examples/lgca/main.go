// Command lgca writes, trains and evaluates the logic-gate cellular
// automaton example: a 16×16 grid of cells with 8 channels, each running
// the same circuit of 3,048 difflogic gates (16 perception kernels of
// 8+4+2+1 gates, an update network of 10×256+128+64+32+16+8 gates) for 20
// steps from the all-zero grid, trained so that channel 0 of the final grid
// is a checkerboard of 2×2 squares.
//
//	go run ./examples/lgca -kir examples/lgca/automaton.kir -sharpen-kir examples/lgca/sharpen.kir
//	go run ./examples/lgca -train 1150 -save best.safetensors
//	go run ./examples/lgca -eval best.safetensors      # or params from kiln train -save
//
// Training uses Adam (lr 0.05) with every gradient element clipped to ±100,
// in two phases: up to step -sharpen-at (950) the loss is the squared error
// alone; from there the loss adds -entropy (1e-4) times the gates' summed
// entropy, which pushes every gate towards the single gate the hard
// automaton uses, each step's state is clamped to [0,1], and Adam's moments
// start again at 0. Every -every steps it runs the hard automaton (each
// gate replaced by its argmax gate) from the seed and prints its accuracy
// on channel 0; -save keeps the params of the best hard accuracy so far
// (the latest of equals). With the defaults the hard automaton reproduces
// the target on 93.75% of the cells from step 450 to 950 and on 96.88%
// at step 1150. -eval runs the hard automaton of saved params (all of
// the automaton's logits, as kiln train -save writes them) and prints its
// accuracy and its channel 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/internal/atomicfile"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
)

// Automaton is the example's configuration.
var Automaton = frontends.LogicAutomaton{
	Height: 16, Width: 16, Channels: 8, Steps: 20,
	Kernels: 16, KernelLayers: []int{4, 2, 1},
	UpdateLayers: []int{256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 128, 64, 32, 16, 8},
	Seed:         1, InitScale: 1, PassThrough: 5,
}

// Sharpen is the automaton of the second phase of training: the gates'
// summed entropy, times Entropy, is added to the loss, pushing every gate
// towards a single gate as the hard automaton uses, and each step's state
// is clamped to [0,1] (ClampState: sharp gates amplify float32 strays).
func Sharpen(entropy float64) frontends.LogicAutomaton {
	a := Automaton
	a.Entropy, a.ClampState = entropy, true
	return a
}

func main() {
	kir := flag.String("kir", "", "write the training graph as .kir text to this file")
	sharpenKir := flag.String("sharpen-kir", "", "write the second phase's training graph (-entropy) as .kir text to this file")
	steps := flag.Int("train", 0, "train for this many steps")
	sharpenAt := flag.Int("sharpen-at", 950, "with -train, after this many steps go on with the entropy term (-entropy) and the state clamped, the Adam moments starting again at 0")
	entropy := flag.Float64("entropy", 1e-4, "the weight of the gates' summed entropy in the second phase's loss")
	every := flag.Int("every", 50, "evaluate the hard automaton every this many steps")
	lr := flag.Float64("lr", 0.05, "Adam's learning rate")
	seed := flag.Uint64("seed", 1, "seed of the initial logits")
	workers := flag.Int("workers", 0, "goroutines that run the plan (default: the number of CPUs)")
	initFile := flag.String("init", "", "with -train, start from the params in this safetensors file")
	save := flag.String("save", "", "with -train, write the params of the best hard accuracy to this safetensors file (at each new best or equal)")
	eval := flag.String("eval", "", "run the hard automaton of the params in this safetensors file and print its accuracy")
	flag.Parse()
	if flag.NArg() > 0 || *every < 1 || *workers < 0 || *sharpenAt < 0 || !(*entropy >= 0) ||
		(*eval != "" && *steps > 0) || (*steps == 0 && (*save != "" || *initFile != "")) {
		fmt.Fprintln(os.Stderr, "usage: lgca [-kir FILE] [-sharpen-kir FILE] [-train N [-sharpen-at S] [-entropy E] [-every K] [-lr LR] [-seed S] [-workers W] [-init FILE] [-save FILE]] [-eval FILE]")
		os.Exit(2)
	}
	err := func() error {
		if *eval != "" {
			return evaluate(os.Stdout, Automaton, *eval)
		}
		for _, w := range []struct {
			path string
			a    frontends.LogicAutomaton
		}{{*kir, Automaton}, {*sharpenKir, Sharpen(*entropy)}} {
			if w.path == "" {
				continue
			}
			g, err := w.a.Build(ir.F32)
			if err != nil {
				return err
			}
			if err := atomicfile.WriteFile(w.path, kirText(w.a, g)); err != nil {
				return err
			}
		}
		if *steps == 0 {
			return nil
		}
		return train(trainConfig{steps: *steps, sharpenAt: *sharpenAt, entropy: *entropy, every: *every, lr: *lr,
			seed: *seed, workers: *workers, initFile: *initFile, save: *save})
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lgca:", err)
		os.Exit(1)
	}
}

// trainConfig is what -train runs.
type trainConfig struct {
	steps, sharpenAt, every, workers int
	entropy, lr                      float64
	seed                             uint64
	initFile, save                   string
}

// train trains Automaton for c.steps steps: up to c.sharpenAt with its
// loss, then with Sharpen's, carrying the params over (the Adam moments
// start again at 0). Every c.every steps it prints the hard automaton's
// accuracy, and keeps the best params in c.save.
func train(c trainConfig) error {
	opt, err := passes.DefaultOptimizer("adam")
	if err != nil {
		return err
	}
	opt.LR, opt.ClipGrad = c.lr, 100
	var params []safetensors.Tensor
	if c.initFile != "" {
		if params, _, err = safetensors.ReadFile(c.initFile); err != nil {
			return err
		}
	}
	phases := []struct {
		a        frontends.LogicAutomaton
		from, to int
	}{{Automaton, 0, min(c.sharpenAt, c.steps)}, {Sharpen(c.entropy), min(c.sharpenAt, c.steps), c.steps}}
	var trained time.Duration
	best, bestStep := -1.0, 0
	for _, ph := range phases {
		if ph.to <= ph.from {
			continue
		}
		start := time.Now()
		g, err := ph.a.Build(ir.F32)
		if err != nil {
			return err
		}
		p, err := kiln.Compile(g, kiln.Options{Optimizer: &opt})
		if err != nil {
			return err
		}
		x, err := cpu.New(p, cpu.Options{Seed: c.seed, Workers: c.workers})
		if err != nil {
			return err
		}
		defer x.Close()
		for _, t := range params {
			if err := x.Set(t.Name, kernels.Tensor{Type: t.Type, Data: t.Data}); err != nil {
				return fmt.Errorf("%s: %w", c.initFile, err)
			}
		}
		fmt.Printf("steps %d to %d: entropy %g, %d gates, %d plan steps, arena %d bytes, compiled in %v, %d workers\n",
			ph.from+1, ph.to, ph.a.Entropy, ph.a.Gates(), len(p.Steps), p.ArenaBytes, time.Since(start).Round(time.Millisecond), x.Workers())
		for step := ph.from + 1; step <= ph.to; step++ {
			t0 := time.Now()
			if err := x.Step(context.Background()); err != nil {
				return err
			}
			trained += time.Since(t0)
			if step%c.every != 0 && step != c.steps {
				continue
			}
			values, err := paramValues(x)
			if err != nil {
				return err
			}
			acc, _, err := hardAccuracy(Automaton, values)
			if err != nil {
				return err
			}
			loss, err := x.Get("loss")
			if err != nil {
				return err
			}
			fmt.Printf("step %d: loss %.4f, hard accuracy %.4f, %.0f ms/step\n",
				step, kernels.Float64s(loss)[0], acc, float64(trained.Milliseconds())/float64(step-phases[0].from))
			if acc >= best {
				best, bestStep = acc, step
				if c.save != "" {
					if err := saveParams(c.save, x); err != nil {
						return err
					}
				}
			}
		}
		if params, err = paramTensors(x); err != nil {
			return err
		}
		c.initFile = "the first phase's params"
	}
	fmt.Printf("best hard accuracy %.4f at step %d\n", best, bestStep)
	if c.save != "" {
		fmt.Printf("saved the params of step %d to %s\n", bestStep, c.save)
	}
	return nil
}

// kirText returns the .kir file of a's graph g: a comment, then g's text.
func kirText(a frontends.LogicAutomaton, g *ir.Graph) []byte {
	gen := "-kir examples/lgca/automaton.kir"
	if a.Entropy > 0 {
		gen = "-sharpen-kir examples/lgca/sharpen.kir"
	}
	head := `# A differentiable logic-gate cellular automaton (DiffLogic CA), generated by
# go run ./examples/lgca ` + gen + `; do not edit.
# A 16x16 grid of cells with 8 channels starts all zero; for 20 steps every
# cell reads its 3x3 neighbourhood (zero outside the grid: pad, slices,
# stack), runs 16 perception kernels (8+4+2+1 gates each, applied to every
# channel) and an update network (10x256+128+64+32+16+8 gates) over its state
# and what it perceived; the 8 gates of the last layer are its new state.
# Every gate is a logic_gate whose two inputs are picked by index_select
# with constant indices (the fixed random wiring); the logits of every layer
# are the same params in every step. The loss is the summed squared error
# of channel 0 of the final grid against a checkerboard of 2x2 squares.
# %t0 adds 5 to gate 3 (a, pass-through) of every update gate's logits.
`
	if a.Entropy > 0 {
		head += fmt.Sprintf(`# The second phase of training: the loss adds %g times the summed entropy
# of every gate's softmax(logits), and each step's new state is clamped to
# [0,1].
`, a.Entropy)
	}
	return append([]byte(head), g.Format()...)
}

// paramValues returns the values of x's params by name.
func paramValues(x *cpu.Executor) (map[string][]float64, error) {
	params := map[string][]float64{}
	p := x.Plan()
	for _, i := range p.Params {
		v, err := x.Get(p.Buffers[i].Name)
		if err != nil {
			return nil, err
		}
		params[p.Buffers[i].Name] = kernels.Float64s(v)
	}
	return params, nil
}

// paramTensors returns copies of x's params as safetensors tensors.
func paramTensors(x *cpu.Executor) ([]safetensors.Tensor, error) {
	var ts []safetensors.Tensor
	p := x.Plan()
	for _, i := range p.Params {
		v, err := x.Get(p.Buffers[i].Name)
		if err != nil {
			return nil, err
		}
		ts = append(ts, safetensors.Tensor{Name: p.Buffers[i].Name, Type: v.Type, Data: append([]byte(nil), v.Data...)})
	}
	return ts, nil
}

// saveParams writes x's params to path (atomically) as safetensors.
func saveParams(path string, x *cpu.Executor) error {
	ts, err := paramTensors(x)
	if err != nil {
		return err
	}
	return safetensors.WriteFile(path, ts, nil)
}

// evaluate reads the params in path, runs the hard automaton of a from the
// seed and writes its accuracy and channel 0 of its final grid to w.
func evaluate(w io.Writer, a frontends.LogicAutomaton, path string) error {
	ts, _, err := safetensors.ReadFile(path)
	if err != nil {
		return err
	}
	params := map[string][]float64{}
	for _, t := range ts {
		params[t.Name] = kernels.Float64s(kernels.Tensor{Type: t.Type, Data: t.Data})
	}
	acc, grid, err := hardAccuracy(a, params)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	target := a.Target()
	fmt.Fprintf(w, "hard accuracy %.4f (%d of %d cells); channel 0 of the final grid (x: wrong):\n",
		acc, int(acc*float64(len(target))+0.5), len(target))
	for i := range a.Height {
		for j := range a.Width {
			k := i*a.Width + j
			c := "."
			if grid[k*a.Channels] > 0.5 {
				c = "#"
			}
			if (grid[k*a.Channels] > 0.5) != (target[k] == 1) {
				c = "x"
			}
			fmt.Fprint(w, c)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// hardAccuracy runs the hard automaton of the params (by name) from the
// seed and returns the fraction of cells where channel 0 matches the
// target, and the final grid.
func hardAccuracy(a frontends.LogicAutomaton, params map[string][]float64) (float64, []float64, error) {
	gates, err := a.HardGates(params)
	if err != nil {
		return 0, nil, err
	}
	hg, err := a.BuildHard(ir.F32, gates)
	if err != nil {
		return 0, nil, err
	}
	hp, err := kiln.Compile(hg, kiln.Options{})
	if err != nil {
		return 0, nil, err
	}
	hx, err := cpu.New(hp, cpu.Options{Workers: 1})
	if err != nil {
		return 0, nil, err
	}
	defer hx.Close()
	if err := hx.Step(context.Background()); err != nil {
		return 0, nil, err
	}
	t, err := hx.Get("grid")
	if err != nil {
		return 0, nil, err
	}
	grid := kernels.Float64s(t)
	acc, err := a.Accuracy(grid)
	return acc, grid, err
}
