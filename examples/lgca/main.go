// Command lgca writes, trains and evaluates the logic-gate cellular
// automaton example: a 16×16 grid of cells with 8 channels, each running
// the same circuit of 3,048 difflogic gates (16 perception kernels of
// 8+4+2+1 gates, an update network of 10×256+128+64+32+16+8 gates) for 20
// steps from the all-zero grid, trained so that channel 0 of the final grid
// is a checkerboard of 2×2 squares.
//
//	go run ./examples/lgca -kir examples/lgca/automaton.kir    # write the .kir
//	go run ./examples/lgca -train 1000 -every 50 -save best.safetensors
//	go run ./examples/lgca -eval params.safetensors            # e.g. from kiln train -save
//
// Training uses Adam (lr 0.05) with every gradient element clipped to ±100,
// and every -every steps runs the hard automaton (each gate replaced by its
// argmax gate) from the seed and prints its accuracy on channel 0; -save
// keeps the params of the best hard accuracy so far (the latest of equals). -eval runs the hard
// automaton of saved params (all of the automaton's logits, as kiln train
// -save writes them) and prints its accuracy and its channel 0.
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

func main() {
	kir := flag.String("kir", "", "write the training graph as .kir text to this file")
	steps := flag.Int("train", 0, "train for this many steps")
	every := flag.Int("every", 50, "evaluate the hard automaton every this many steps")
	lr := flag.Float64("lr", 0.05, "Adam's learning rate")
	seed := flag.Uint64("seed", 1, "seed of the initial logits")
	workers := flag.Int("workers", 0, "goroutines that run the plan (default: the number of CPUs)")
	save := flag.String("save", "", "with -train, write the params of the best hard accuracy to this safetensors file (at each new best)")
	entropy := flag.Float64("entropy", 0, "add this times the gates' summed entropy to the loss (-kir and -train): it pushes the gates towards single gates")
	clamp := flag.Bool("clamp", false, "clamp each step's new state to [0,1] (-kir and -train): keeps float32 rounding from growing through sharp gates")
	initFile := flag.String("init", "", "with -train, start from the params in this safetensors file (the Adam moments start at 0)")
	eval := flag.String("eval", "", "run the hard automaton of the params in this safetensors file and print its accuracy")
	flag.Parse()
	if flag.NArg() > 0 || *every < 1 || *workers < 0 || (*eval != "" && *steps > 0) || (*save != "" && *steps == 0) || (*initFile != "" && *steps == 0) {
		fmt.Fprintln(os.Stderr, "usage: lgca [-kir FILE] [-train N [-every K] [-lr LR] [-seed S] [-workers W] [-init FILE] [-save FILE]] [-entropy E] [-clamp] [-eval FILE]")
		os.Exit(2)
	}
	if *eval != "" {
		if err := evaluate(os.Stdout, Automaton, *eval); err != nil {
			fmt.Fprintln(os.Stderr, "lgca:", err)
			os.Exit(1)
		}
		return
	}
	a := Automaton
	a.Entropy, a.ClampState = *entropy, *clamp
	if err := run(a, *kir, *steps, *every, *lr, *seed, *workers, *initFile, *save); err != nil {
		fmt.Fprintln(os.Stderr, "lgca:", err)
		os.Exit(1)
	}
}

func run(a frontends.LogicAutomaton, kir string, steps, every int, lr float64, seed uint64, workers int, initFile, save string) error {
	g, err := a.Build(ir.F32)
	if err != nil {
		return err
	}
	if kir != "" {
		if err := atomicfile.WriteFile(kir, kirText(g)); err != nil {
			return err
		}
	}
	if steps == 0 {
		return nil
	}
	opt, err := passes.DefaultOptimizer("adam")
	if err != nil {
		return err
	}
	opt.LR, opt.ClipGrad = lr, 100
	start := time.Now()
	p, err := kiln.Compile(g, kiln.Options{Optimizer: &opt})
	if err != nil {
		return err
	}
	x, err := cpu.New(p, cpu.Options{Seed: seed, Workers: workers})
	if err != nil {
		return err
	}
	defer x.Close()
	if initFile != "" {
		ts, _, err := safetensors.ReadFile(initFile)
		if err != nil {
			return err
		}
		for _, t := range ts {
			if err := x.Set(t.Name, kernels.Tensor{Type: t.Type, Data: t.Data}); err != nil {
				return fmt.Errorf("%s: %w", initFile, err)
			}
		}
	}
	fmt.Printf("%d gates, %d plan steps, arena %d bytes, compiled in %v, %d workers\n",
		a.Gates(), len(p.Steps), p.ArenaBytes, time.Since(start).Round(time.Millisecond), x.Workers())
	var trained time.Duration
	best, bestStep := -1.0, 0
	for step := 1; step <= steps; step++ {
		t0 := time.Now()
		if err := x.Step(context.Background()); err != nil {
			return err
		}
		trained += time.Since(t0)
		if step%every != 0 && step != steps {
			continue
		}
		params, err := paramValues(x)
		if err != nil {
			return err
		}
		acc, _, err := hardAccuracy(a, params)
		if err != nil {
			return err
		}
		loss, err := x.Get("loss")
		if err != nil {
			return err
		}
		fmt.Printf("step %d: loss %.4f, hard accuracy %.4f, %.0f ms/step\n",
			step, kernels.Float64s(loss)[0], acc, float64(trained.Milliseconds())/float64(step))
		if acc >= best {
			best, bestStep = acc, step
			if save != "" {
				if err := saveParams(save, x); err != nil {
					return err
				}
			}
		}
	}
	fmt.Printf("best hard accuracy %.4f at step %d\n", best, bestStep)
	if save != "" {
		fmt.Printf("saved the params of step %d to %s\n", bestStep, save)
	}
	return nil
}

// kirText returns the example's .kir file: a comment, then g's text.
func kirText(g *ir.Graph) []byte {
	const head = `# A differentiable logic-gate cellular automaton (DiffLogic CA), generated by
# go run ./examples/lgca -kir examples/lgca/automaton.kir; do not edit.
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

// saveParams writes x's params to path (atomically) as safetensors.
func saveParams(path string, x *cpu.Executor) error {
	var ts []safetensors.Tensor
	p := x.Plan()
	for _, i := range p.Params {
		v, err := x.Get(p.Buffers[i].Name)
		if err != nil {
			return err
		}
		ts = append(ts, safetensors.Tensor{Name: p.Buffers[i].Name, Type: v.Type, Data: append([]byte(nil), v.Data...)})
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
