package main

import (
	"flag"
	"io"

	"github.com/kilnml/kiln"
)

func runPlan(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	o0 := addO0Flag(fs)
	report := fs.Bool("report", false, "print a short memory report (arena, lower bound, ratio, params/state/inputs, largest buffers, in-place reuse) instead of the whole plan")
	of := addOptimizerFlags(fs, "")
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	path, err := oneFile(pos, "FILE.kir")
	if err != nil {
		return err
	}
	opt, err := of.config()
	if err != nil {
		return err
	}
	g, opts, err := load(path, opt, *o0)
	if err != nil {
		return err
	}
	p, err := kiln.Compile(g, opts)
	if err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return fail(path, "the plan fails its check: %v", err)
	}
	out := p.Format()
	if *report {
		out = p.Report()
	}
	_, err = io.WriteString(stdout, out)
	return err
}
