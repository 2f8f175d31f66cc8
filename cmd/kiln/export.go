package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/safetensors"
)

// runExport implements kiln export: a model's forward graph as an ONNX
// model, with its params' values as initializers.
func runExport(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	mf := addModelFlags(fs)
	paramsPath := fs.String("params", "", "safetensors file with the params' values, as kiln train -save writes it (default for an ONNX model: its initializers)")
	out := fs.String("o", "", "the ONNX model to write")
	withLoss := fs.Bool("with-loss", false, "export the first output (the loss), and the targets it reads, too")
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	path, err := oneFile(pos, "MODEL.kir")
	if err != nil {
		return err
	}
	if *out == "" {
		return usagef("missing -o FILE.onnx")
	}
	if err := checkFiles([]fileArg{{"MODEL.kir", path}, {"-params", *paramsPath}}, []fileArg{{"-o", *out}}); err != nil {
		return err
	}
	g, params, err := loadGraph(path, mf)
	if err != nil {
		return err
	}
	if *paramsPath != "" {
		given, _, err := safetensors.ReadFile(*paramsPath)
		if err != nil {
			return err
		}
		params = mergeParams(params, given)
	} else if n := len(g.Params()); n > 0 && len(params) == 0 {
		return usagef("missing -params P.safetensors: %s has %d params and no values for them", path, n)
	}
	if !*withLoss {
		if len(g.Outputs) < 2 {
			return fmt.Errorf("%s: the only output, %%%s, is the loss; -with-loss exports it", path, g.Value(g.Outputs[0]).Name)
		}
		g = g.Clone()
		g.Outputs = g.Outputs[1:]
	}
	var b bytes.Buffer
	if err := onnx.Export(g, params, &b); err != nil {
		if *paramsPath != "" {
			return fmt.Errorf("%s with -params %s: %v", path, *paramsPath, err)
		}
		return fmt.Errorf("%s: %v", path, err)
	}
	if err := writeOutput("-o", *out, "the ONNX model", g.Name, b.Bytes()); err != nil {
		return err
	}
	var names []string
	for _, o := range g.Outputs {
		names = append(names, "%"+g.Value(o).Name)
	}
	fmt.Fprintf(stdout, "wrote %s: the forward graph of %s to %v (ONNX opset %d, %d bytes)\n", *out, g.Name, names, onnx.ExportOpset, b.Len())
	return nil
}

// mergeParams returns params with the tensors of given in place of those
// of the same name, and given's others appended.
func mergeParams(params, given []safetensors.Tensor) []safetensors.Tensor {
	out := append([]safetensors.Tensor(nil), params...)
	for _, t := range given {
		i := slices.IndexFunc(out, func(p safetensors.Tensor) bool { return p.Name == t.Name })
		if i >= 0 {
			out[i] = t
		} else {
			out = append(out, t)
		}
	}
	return out
}
