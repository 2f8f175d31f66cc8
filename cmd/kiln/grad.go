package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// runGrad implements kiln grad: one forward and backward run of a graph on
// tensors from a safetensors file, writing every output and grad/PARAM.
func runGrad(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("grad", flag.ContinueOnError)
	cflags := addCompileFlags(fs, withRecompute)
	inPath := fs.String("inputs", "", "safetensors file with a tensor for every input and param (named without %); params the model file or -init give may be left out")
	initPath := fs.String("init", "", "safetensors file with values of params (over the ONNX initializers; -inputs overrides both)")
	outPath := fs.String("out", "", "safetensors file to write: every output by name and grad/PARAM for every param not frozen")
	workers := addWorkersFlag(fs)
	device := addDeviceFlag(fs)
	path, err := parseModelRun(fs, args, stdout, workers, device)
	if err != nil {
		return err
	}
	if *inPath == "" || *outPath == "" {
		return usagef("both -inputs and -out are required")
	}
	if err := checkFiles([]fileArg{{"FILE.kir", path}, {"-inputs", *inPath}, {"-init", *initPath}}, []fileArg{{"-out", *outPath}}); err != nil {
		return err
	}
	if err := cflags.checkUsage(); err != nil { // usage errors first
		return err
	}
	tensors, _, err := safetensors.ReadFile(*inPath)
	if err != nil {
		return err
	}
	cflags.model.feed(tensors)
	var inits []safetensors.Tensor
	if *initPath != "" {
		if inits, _, err = safetensors.ReadFile(*initPath); err != nil {
			return err
		}
	}
	g, params, opts, err := cflags.load(path, nil)
	if err != nil {
		return err
	}
	if err := checkFeedFile(g, path, *initPath, inits, true); err != nil {
		return err
	}
	p, err := compileFor(path, g, opts, *device)
	if err != nil {
		return err
	}
	x, err := kiln.NewExecutor(p, kiln.ExecOptions{Device: *device, CheckNaN: opts.Debug.NaN, Workers: *workers})
	if err != nil {
		return fail(path, "%v", err)
	}
	defer x.Close()
	// Params the model file (ONNX initializers) or -init gives values may
	// be left out of -inputs.
	tensors = slices.Concat(params, inits, tensors)
	if err := feedAll(x, p, tensors, *inPath, path, false); err != nil {
		return err
	}
	if err := x.Step(context.Background()); err != nil {
		return fail(path, "%v", err)
	}
	var out []safetensors.Tensor
	for _, n := range append(append([]planner.Named(nil), p.Outputs...), p.Grads...) {
		t, err := x.Get(n.Name)
		if err != nil {
			return err
		}
		out = append(out, safetensors.Tensor{Name: n.Name, Type: t.Type, Data: append([]byte(nil), t.Data...)})
	}
	if err := safetensors.WriteFile(*outPath, out, map[string]string{"graph": g.Name, "source": path}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d outputs and %d gradients to %s\n", len(p.Outputs), len(p.Grads), *outPath)
	return nil
}

// feedAll sets every input and param of p from tensors, which must hold
// exactly those, and may hold state (an ONNX model's running statistics),
// with the plan's dtypes and shapes. With someParams, tensors may leave
// params out: they keep the values they have.
func feedAll(x kiln.Executor, p *planner.Plan, tensors []safetensors.Tensor, file, model string, someParams bool) error {
	want := map[string]int{}
	var names []string
	for _, i := range append(append([]int(nil), p.Inputs...), p.Params...) {
		want[p.Buffers[i].Name] = i
		names = append(names, p.Buffers[i].Name)
	}
	for _, i := range p.States {
		want[p.Buffers[i].Name] = i
	}
	have := map[string]bool{}
	for _, t := range tensors {
		i, ok := want[t.Name]
		if !ok {
			return fmt.Errorf("%s: tensor %q is not an input or param of %s (expected: %s)", file, t.Name, model, strings.Join(names, ", "))
		}
		if b := p.Buffers[i]; !b.Type.Equal(t.Type) {
			return fmt.Errorf("%s: tensor %q: expected %s, found %s", file, t.Name, b.Type, t.Type)
		}
		if err := x.Set(t.Name, kernels.Tensor{Type: t.Type, Data: t.Data}); err != nil {
			return fmt.Errorf("%s: %v", file, err)
		}
		have[t.Name] = true
	}
	var missing []string
	for _, n := range names {
		if !have[n] && !(someParams && p.Buffers[want[n]].Role == planner.Param) {
			missing = append(missing, fmt.Sprintf("%s (%s)", n, p.Buffers[want[n]].Type))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		return fmt.Errorf("%s: missing tensor(s) for %s: %s", file, model, strings.Join(missing, ", "))
	}
	return nil
}
