package main

import (
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// runGradcheck implements kiln gradcheck: the analytic gradient of every
// param of a graph against central differences in float64.
func runGradcheck(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gradcheck", flag.ContinueOnError)
	cflags := addCompileFlags(fs, 0)
	inPath := fs.String("inputs", "", "safetensors file with values for inputs and params (default: random values from -seed)")
	seed := fs.Uint64("seed", 1, "seed of the random values")
	rtol := fs.Float64("rtol", 1e-7, "relative tolerance")
	atol := fs.Float64("atol", 1e-10, "absolute tolerance")
	step := fs.Float64("step", 1e-3, "finite-difference step h: the stencil samples the loss at ±h and ±2h")
	workers := addWorkersFlag(fs)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := checkWorkers(*workers); err != nil {
		return err
	}
	if !(*step > 0) || math.IsInf(*step, 0) {
		return usagef("-step must be a positive number, found %g", *step)
	}
	if !(*rtol >= 0 && *atol >= 0) || math.IsInf(*rtol, 0) || math.IsInf(*atol, 0) {
		return usagef("-rtol and -atol must be finite and at least 0, found %g and %g", *rtol, *atol)
	}
	if *rtol == 0 && *atol == 0 {
		return usagef("-rtol and -atol are both 0: no gradient computed in floating point passes; give a bound")
	}
	path, err := oneFile(pos, "FILE.kir")
	if err != nil {
		return err
	}
	var tensors []safetensors.Tensor
	if *inPath != "" {
		if tensors, _, err = safetensors.ReadFile(*inPath); err != nil {
			return err
		}
		cflags.model.feed(tensors) // a symbolic dim takes the inputs' shape
	}
	g, _, opts, err := cflags.load(path, nil)
	if err != nil {
		return err
	}
	if len(g.Params()) == 0 {
		return fail(path, "the graph has no params to check")
	}
	feeds := kiln.RandomFeeds(g, *seed)
	if *inPath != "" {
		for _, t := range tensors {
			id, ok := g.Lookup(t.Name)
			if !ok || (g.Value(id).Op != ir.OpInput && g.Value(id).Op != ir.OpParam) {
				return fmt.Errorf("%s: tensor %q is not an input or param of %s", *inPath, t.Name, path)
			}
			if want := g.Type(id); !want.Equal(t.Type) {
				return fmt.Errorf("%s: tensor %q: expected %s, found %s", *inPath, t.Name, want, t.Type)
			}
			feeds[t.Name] = t.Float64s()
		}
	}
	res, err := kiln.GradCheck(g, feeds, kiln.GradCheckOptions{RTol: *rtol, ATol: *atol, Step: *step, O0: opts.O0, Workers: *workers})
	if err != nil {
		return fail(path, "%v", err)
	}
	bad, unchecked := 0, 0
	fmt.Fprintf(stdout, "%-20s %8s %22s %22s  %s\n", "param", "worst", "analytic", "numeric", "")
	for _, r := range res {
		if r.AllSkipped() {
			unchecked++
			fmt.Fprintf(stdout, "%-20s %8s %22s %22s  skipped: all %d elements lie within 2h = %g of a point where the loss is not smooth (a kink such as relu's, a tie of a max)\n",
				r.Param, "-", "-", "-", r.Skipped, 2**step)
			continue
		}
		verdict := "ok"
		if !r.OK() {
			verdict = "FAIL"
			bad++
		}
		if r.Skipped > 0 {
			verdict += fmt.Sprintf(" (%d elements skipped: the loss is not smooth within 2h of them)", r.Skipped)
		}
		fmt.Fprintf(stdout, "%-20s %8d %22.15g %22.15g  %s\n", r.Param, r.Index, r.Analytic, r.Numeric, verdict)
	}
	if unchecked > 0 && bad == 0 {
		return fail(path, "%d of %d params could not be checked: every element was skipped; try a smaller -step or other values (-seed, -inputs)", unchecked, len(res))
	}
	if bad > 0 {
		also := ""
		if unchecked > 0 {
			also = fmt.Sprintf("; %d could not be checked (every element skipped)", unchecked)
		}
		return fail(path, "%d of %d params exceed |analytic-numeric| <= %g + %g*|numeric| (worst element shown)%s", bad, len(res), *atol, *rtol, also)
	}
	fmt.Fprintf(stdout, "all %d params within |analytic-numeric| <= %g + %g*|numeric|\n", len(res), *atol, *rtol)
	return nil
}
