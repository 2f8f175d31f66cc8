package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/kilnml/kiln/ir"
)

// runOps implements kiln ops: every op of the table with its arguments,
// attributes and defaults, and whether gradients flow through it.
func runOps(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("ops", flag.ContinueOnError)
	md := fs.Bool("md", false, "print the Markdown reference (docs/OPS.md) instead")
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("kiln ops takes no arguments, found %q", pos[0])
	}
	if *md {
		_, err := io.WriteString(stdout, ir.Reference())
		return err
	}
	for _, op := range ir.Ops() {
		info := op.Info()
		grad := "grad"
		switch {
		case op.IsLeaf():
			grad = "decl"
		case !op.Differentiable():
			grad = "-"
		}
		fmt.Fprintf(stdout, "%-60s %-4s  %s\n", op.Signature(), grad, info.Doc)
	}
	return nil
}
