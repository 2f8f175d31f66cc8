package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

func runDump(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	o0 := addO0Flag(fs)
	after := fs.String("after", "", "print the IR after this pass, or after every pass with all (passes: "+strings.Join(passes.Order, ", ")+")")
	dot := fs.Bool("dot", false, "write Graphviz dot instead of .kir text")
	of := addOptimizerFlags(fs, "")
	cf := addCheckpointFlags(fs)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	path, err := oneFile(pos, "FILE.kir")
	if err != nil {
		return err
	}
	if *after != "" && *after != "all" {
		found := false
		for _, p := range passes.Order {
			found = found || p == *after
		}
		if !found {
			return usagef("unknown pass %q for -after (passes: %s, or all)", *after, strings.Join(passes.Order, ", "))
		}
	}
	opt, err := of.config()
	if err != nil {
		return err
	}
	g, opts, err := load(path, opt, *o0)
	if err != nil {
		return err
	}
	if err := cf.apply(&opts); err != nil {
		return err
	}
	write := func(g *ir.Graph) {
		if *dot {
			io.WriteString(stdout, g.Dot())
		} else {
			io.WriteString(stdout, g.Format())
		}
	}
	ran := false
	opts.After = func(pass string, g *ir.Graph) {
		switch {
		case *after == "all":
			if !*dot {
				fmt.Fprintf(stdout, "# after %s\n", pass)
			}
			write(g)
		case *after == pass:
			write(g)
			ran = true
		}
	}
	tg, err := kiln.Transform(g, opts)
	if err != nil {
		return err
	}
	switch {
	case *after == "":
		write(tg)
	case *after != "all" && !ran:
		return fmt.Errorf("%s: pass %s did not run for this graph (it runs with -optimizer, or needs params; remat with -checkpoint, -memory-budget or recompute marks)", path, *after)
	}
	return nil
}
