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
	cflags := addCompileFlags(fs, withOptimizer|withSchedule|withRecompute|withRanks)
	after := fs.String("after", "", "print the IR after this pass, or after every pass with all (passes: "+strings.Join(passes.Names(), ", ")+")")
	dot := fs.Bool("dot", false, "write Graphviz dot instead of .kir text")
	html := fs.String("html", "", "write an HTML page with the graph after every pass side by side to this file")
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	path, err := oneFile(pos, "FILE.kir")
	if err != nil {
		return err
	}
	if _, ok := passes.Lookup(*after); !ok && *after != "" && *after != "all" {
		return usagef("unknown pass %q for -after (passes: %s, or all)", *after, strings.Join(passes.Names(), ", "))
	}
	if *html != "" && (*after != "" || *dot) {
		return usagef("-html writes every pass; it does not combine with -after or -dot")
	}
	if err := checkFiles([]fileArg{{"FILE.kir", path}}, []fileArg{{"-html", *html}}); err != nil {
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
	if *html != "" {
		return dumpHTML(*html, path, g, opts, args, stdout)
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
		return fmt.Errorf("%s: pass %s did not run for this graph (it runs with -optimizer, or needs params; remat with -recompute, -memory-budget or recompute marks)", path, *after)
	}
	return nil
}

// dumpHTML writes the page of kiln dump -html (html.go) to out and says so
// on stdout.
func dumpHTML(out, path string, g *ir.Graph, opts kiln.Options, args []string, stdout io.Writer) error {
	snaps, err := recordPasses(g, opts)
	if err != nil {
		return err
	}
	page := newHTMLPage(g.Name, path, commandLine(append([]string{"kiln", "dump"}, args...)), snaps)
	if err := writeFileAtomic(out, func(w io.Writer) error { return writeHTML(w, page) }); err != nil {
		return err
	}
	changed := 0
	for _, c := range page.Columns[1:] {
		if c.Changed {
			changed++
		}
	}
	_, err = fmt.Fprintf(stdout, "wrote %s: %d passes (%d changed the graph), %d values after the last\n", out, len(page.Columns)-1, changed, snaps[len(snaps)-1].After)
	return err
}
