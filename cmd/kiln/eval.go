package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// runEval implements kiln eval: one run of a model's forward graph (no
// gradient, no optimizer update, dropout off) on tensors from a
// safetensors file, writing every output under its name.
func runEval(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	cflags := addCompileFlags(fs, 0)
	inPath := fs.String("inputs", "", "safetensors file with a tensor for every input, and for params the model file gives no value (named without %)")
	initPath := fs.String("init", "", "safetensors file with values of params (over the ONNX initializers; -inputs overrides both)")
	outPath := fs.String("out", "", "safetensors file to write: every output of the graph by name")
	workers := addWorkersFlag(fs)
	device := addDeviceFlag(fs)
	path, err := parseModelRun(fs, args, stdout, workers, device)
	if err != nil {
		return err
	}
	if *outPath == "" {
		return usagef("missing -out OUT.safetensors")
	}
	if err := checkFiles([]fileArg{{"FILE.kir", path}, {"-inputs", *inPath}, {"-init", *initPath}}, []fileArg{{"-out", *outPath}}); err != nil {
		return err
	}
	dbg, err := debugSwitches()
	if err != nil {
		return err
	}
	files := []struct {
		path    string
		params  bool
		tensors []safetensors.Tensor
	}{{path: *initPath, params: true}, {path: *inPath}}
	for k, f := range files {
		if f.path == "" {
			continue
		}
		if files[k].tensors, _, err = safetensors.ReadFile(f.path); err != nil {
			return err
		}
	}
	cflags.model.feed(files[1].tensors) // a symbolic dim takes the inputs' shape
	g, feeds, err := loadGraph(path, cflags.model)
	if err != nil {
		return err
	}
	feeds = slices.Clone(feeds)
	for _, f := range files {
		if err := checkFeedFile(g, path, f.path, f.tensors, f.params); err != nil {
			return err
		}
		feeds = append(feeds, f.tensors...)
	}
	if err := kiln.CheckFeeds(g, feeds); err != nil {
		if *inPath != "" {
			return fmt.Errorf("%s: %v", *inPath, err)
		}
		return fail(path, "%v (give them with -inputs)", err)
	}
	out, err := kiln.Eval(context.Background(), g, feeds, kiln.Options{Device: *device, Workers: *workers, O0: *cflags.o0, Debug: dbg})
	if err != nil {
		return err
	}
	if err := safetensors.WriteFile(*outPath, out, map[string]string{"graph": g.Name, "source": path}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d outputs to %s\n", len(out), *outPath)
	return nil
}

// checkFeedFile checks the tensors read from file for the graph g of the
// model at path: each names an input, param or state of g (a param or
// state only, when params is set: an -init file, such as kiln import
// writes) and has its type.
func checkFeedFile(g *ir.Graph, path, file string, ts []safetensors.Tensor, params bool) error {
	for _, t := range ts {
		if id, ok := g.Lookup(t.Name); params && (!ok || g.Value(id).Op != ir.OpParam && g.Value(id).Op != ir.OpState) {
			return fmt.Errorf("%s: tensor %q is not a param or state of %s", file, ir.Excerpt(t.Name), path)
		}
		if err := kiln.CheckFeed(g, t); err != nil {
			return fmt.Errorf("%s: %v", file, err)
		}
	}
	return nil
}
