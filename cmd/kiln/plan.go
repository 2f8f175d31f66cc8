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
	o0 := addO0Flag(fs)
	mf := addModelFlags(fs)
	reportFlag := fs.Bool("report", false, "print a short memory report (arena, lower bound, ratio, params/state/inputs, largest buffers, in-place reuse) instead of the whole plan")
	of := addOptimizerFlags(fs, "")
	of.addScheduleFlags(fs)
	cf := addCheckpointFlags(fs)
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
	g, _, opts, err := load(path, mf, opt, *o0)
	if err != nil {
		return err
	}
	if err := cf.apply(&opts); err != nil {
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
