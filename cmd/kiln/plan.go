package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
)

func runPlan(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	cflags := addCompileFlags(fs, withOptimizer|withSchedule|withRecompute|withRanks)
	reportFlag := fs.Bool("report", false, "print a short memory report (arena, lower bound, ratio, params/state/inputs, largest buffers, in-place reuse) instead of the whole plan")
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	path, err := oneFile(pos, "FILE.kir")
	if err != nil {
		return err
	}
	opt, err := cflags.optimizer()
	if err != nil {
		return err
	}
	g, _, opts, err := cflags.load(path, opt)
	if err != nil {
		return err
	}
	var report *checkpoint.Report
	opts.OnCheckpoint = func(r *checkpoint.Report) { report = r }
	p, err := kiln.Compile(g, opts)
	if err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return fail(path, "the plan fails its check: %v", err)
	}
	if report != nil {
		fmt.Fprint(stdout, report)
	}
	var out string
	if *reportFlag {
		out = p.Report()
	} else {
		out = p.Format()
	}
	_, err = io.WriteString(stdout, out)
	return err
}
