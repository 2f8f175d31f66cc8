// Command tracetop summarizes a step's timeline written by kiln bench
// -trace FILE.json: the step's wall time, the time in plan steps on each
// worker's row, and the ops (or, with -by step, the single plan steps)
// that took the most time, as a Markdown table.
//
// Usage:
//
//	go run ./bench/tracetop [-n 15] [-by op|step] FILE.json
//
// An event named "matmul %blk0.fc1" counts under the op "matmul" (-by op,
// the default) or under its own name (-by step); "copy %w" counts under
// "copy". The share is of the summed time of all steps. kiln's trace has
// one event per plan step, on the row of the worker that ran it: a kernel
// that splits its work across the pool (a matmul) counts whole there, so
// the rows' totals say which worker ran which steps, not how busy each
// core was.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/kilnml/kiln/ir"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tracetop:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ error }

// event is one Chrome trace event as kiln bench writes them.
type event struct {
	Name string  `json:"name"`
	Ph   string  `json:"ph"`
	Ts   float64 `json:"ts"`
	Dur  float64 `json:"dur"`
	Tid  int     `json:"tid"`
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tracetop", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("n", 15, "rows of the table")
	by := fs.String("by", "op", "group the events by `op` or list single plan steps (step)")
	if err := fs.Parse(args); err != nil {
		return usageError{fmt.Errorf("%v (usage: tracetop [-n 15] [-by op|step] FILE.json)", err)}
	}
	switch {
	case fs.NArg() != 1:
		return usageError{fmt.Errorf("want one FILE.json, found %d arguments (usage: tracetop [-n 15] [-by op|step] FILE.json)", fs.NArg())}
	case *n < 1:
		return usageError{fmt.Errorf("-n must be at least 1, found %d", *n)}
	case *by != "op" && *by != "step":
		return usageError{fmt.Errorf("-by %q: want op or step", *by)}
	}
	path := fs.Arg(0)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var trace struct {
		TraceEvents []event `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &trace); err != nil {
		return fmt.Errorf("%s: not a Chrome trace (JSON object with traceEvents): %v", path, err)
	}
	s, err := summarize(trace.TraceEvents, *by == "step")
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	_, err = io.WriteString(stdout, s.format(*n))
	return err
}

// row is one line of the table: a group of events and their total time.
type row struct {
	name  string
	count int
	us    float64
}

// summary is what a trace holds, in microseconds.
type summary struct {
	wall, busy float64   // the step's wall time; the summed time of its steps
	workers    []float64 // time in steps per worker row (tid)
	rows       []row     // by total time, longest first
}

// summarize sums the complete ("X") events of a trace by op (the name up
// to " %") or, with bySteps, by their whole name.
func summarize(events []event, bySteps bool) (summary, error) {
	var s summary
	seen := false
	first, last := 0.0, 0.0
	groups := map[string]*row{}
	for _, e := range events {
		if e.Ph != "X" {
			continue
		}
		if e.Tid < 0 || e.Dur < 0 {
			return s, fmt.Errorf("event %q: worker %d, duration %g; want both at least 0", ir.Excerpt(e.Name), e.Tid, e.Dur)
		}
		if !seen || e.Ts < first {
			first = e.Ts
		}
		if !seen || e.Ts+e.Dur > last {
			last = e.Ts + e.Dur
		}
		seen = true
		for len(s.workers) <= e.Tid {
			s.workers = append(s.workers, 0)
		}
		s.workers[e.Tid] += e.Dur
		s.busy += e.Dur
		key := e.Name
		if op, _, ok := strings.Cut(e.Name, " %"); ok && !bySteps {
			key = op
		}
		r := groups[key]
		if r == nil {
			r = &row{name: key}
			groups[key] = r
		}
		r.count++
		r.us += e.Dur
	}
	if !seen {
		return s, errors.New("no complete (\"X\") events: is it a kiln bench -trace file?")
	}
	s.wall = last - first
	for _, r := range groups {
		s.rows = append(s.rows, *r)
	}
	slices.SortFunc(s.rows, func(a, b row) int {
		if a.us != b.us {
			if a.us > b.us {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return s, nil
}

// format prints the summary with the n longest rows and the rest summed.
func (s summary) format(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %.2f ms wall; steps %.2f ms summed (", s.wall/1e3, s.busy/1e3)
	for w, us := range s.workers {
		fmt.Fprintf(&b, "worker %d: %.2f ms; ", w, us/1e3)
	}
	b.WriteString("a step split across workers counts whole on the one that ran it")
	b.WriteString(")\n\n| name | count | total (ms) | share |\n|---|---|---|---|\n")
	share := func(us float64) float64 {
		if s.busy == 0 {
			return 0
		}
		return 100 * us / s.busy
	}
	var rest row
	for i, r := range s.rows {
		if i >= n {
			rest.count += r.count
			rest.us += r.us
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.1f%% |\n", r.name, r.count, r.us/1e3, share(r.us))
	}
	if rest.count > 0 {
		fmt.Fprintf(&b, "| (%d more) | %d | %.2f | %.1f%% |\n", len(s.rows)-n, rest.count, rest.us/1e3, share(rest.us))
	}
	return b.String()
}
