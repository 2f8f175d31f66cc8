package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/internal/atomicfile"
	"github.com/kilnml/kiln/ir"
)

// runImport implements kiln import: an ONNX model written as a .kir graph
// and its initial params as a safetensors file beside it.
func runImport(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	mf := addModelFlags(fs)
	out := fs.String("o", "", "the .kir file to write; the params go to the same path with .safetensors")
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	path, err := oneFile(pos, "FILE.onnx")
	if err != nil {
		return err
	}
	if !strings.EqualFold(filepath.Ext(path), ".onnx") {
		return usagef("expected an ONNX model (FILE.onnx), found %q", ir.Excerpt(path))
	}
	if *out == "" {
		return usagef("missing -o FILE.kir")
	}
	params := paramsPath(*out)
	if err := checkFiles([]fileArg{{"FILE.onnx", path}}, []fileArg{{"-o", *out}, {"the params file", params}}); err != nil {
		return err
	}
	g, ps, err := loadGraph(path, mf)
	if err != nil {
		return err
	}
	text := g.Format()
	// The text must give back the graph: a name or value it cannot carry
	// would make the .kir a different model.
	back, err := ir.Parse(*out, []byte(text))
	if err != nil {
		return fmt.Errorf("%s: the graph does not read back as .kir (a bug in kiln): %v", path, err)
	}
	if back.Format() != text {
		return fmt.Errorf("%s: the graph does not read back as .kir unchanged (a bug in kiln)", path)
	}
	// The params file first: a .kir without its params is the worse half.
	if err := safetensors.WriteFile(params, ps, map[string]string{"graph": g.Name, "source": path}); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(*out, []byte(text)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%d values) and %s (%d initial values of params and state)\n", *out, len(g.Values), params, len(ps))
	return nil
}

// paramsPath returns the params file written beside the .kir file kir:
// the same path with the extension .safetensors.
func paramsPath(kir string) string {
	return strings.TrimSuffix(kir, filepath.Ext(kir)) + ".safetensors"
}
