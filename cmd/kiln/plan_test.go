package main

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

var (
	planHeader  = regexp.MustCompile(`(?m)^plan (\S+): (\d+) steps, (\d+) buffers$`)
	arenaLine   = regexp.MustCompile(`(?m)^arena (\d+) bytes, lower bound (\d+) bytes, ratio (\d+\.\d+)$`)
	bufferLine  = regexp.MustCompile(`^  %(\S+)\s+(\S+)\s+(temp|input|param|state)\s+offset\s+(\d+) size\s+(\d+) live (\d+)\.\.(\d+)(?: in place of %(\S+))?$`)
	stepLine    = regexp.MustCompile(`^\s+(\d+)  (.*)$`)
	copyStep    = regexp.MustCompile(`^copy %(\S+) <- %(\S+)$`)
	kernelStep  = regexp.MustCompile(`^%(\S+): \S+ = [a-z_]+`)
	alignedSize = func(n int64) int64 { return (n + planner.Align - 1) / planner.Align * planner.Align }
)

// printedPlan is what kiln plan printed, parsed back.
type printedPlan struct {
	steps, buffers       int
	arena, lower         int64
	ratio                float64
	bufs                 []planner.Buffer // Name, Offset, Size, Start and End
	types, roles         []string         // each buffer's type and role as printed
	inPlaceOf            []string         // the buffer whose memory each takes in place, or ""
	stepLines, copyLines []string
	sections             []string
}

func parsePlanOutput(t *testing.T, out string) printedPlan {
	t.Helper()
	var pp printedPlan
	m := planHeader.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no plan header line:\n%s", out)
	}
	pp.steps, _ = strconv.Atoi(m[2])
	pp.buffers, _ = strconv.Atoi(m[3])
	m = arenaLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no arena / lower bound / ratio line:\n%s", out)
	}
	pp.arena, _ = strconv.ParseInt(m[1], 10, 64)
	pp.lower, _ = strconv.ParseInt(m[2], 10, 64)
	pp.ratio, _ = strconv.ParseFloat(m[3], 64)

	section := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == "buffers:" || line == "steps:" || line == "signature:":
			section = strings.TrimSuffix(line, ":")
			pp.sections = append(pp.sections, section)
			continue
		case line == "" || !strings.HasPrefix(line, " "):
			continue
		}
		switch section {
		case "buffers":
			m := bufferLine.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("malformed buffer line %q", line)
				continue
			}
			n := func(i int) int64 { v, _ := strconv.ParseInt(m[i], 10, 64); return v }
			pp.bufs = append(pp.bufs, planner.Buffer{Name: m[1], Offset: n(4), Size: n(5), Start: int(n(6)), End: int(n(7))})
			pp.types = append(pp.types, m[2])
			pp.roles = append(pp.roles, m[3])
			pp.inPlaceOf = append(pp.inPlaceOf, m[8])
		case "steps":
			m := stepLine.FindStringSubmatch(line)
			if m == nil || m[1] != strconv.Itoa(len(pp.stepLines)) {
				t.Errorf("malformed or misnumbered step line %q", line)
				continue
			}
			pp.stepLines = append(pp.stepLines, m[2])
			if copyStep.MatchString(m[2]) {
				pp.copyLines = append(pp.copyLines, m[2])
			} else if !kernelStep.MatchString(m[2]) {
				t.Errorf("step line %q is neither a copy nor a kernel", line)
			}
		}
	}
	return pp
}

func TestPlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		optimizer string  // the -optimizer flag
		momentum  float64 // the -momentum flag
		updates   int     // updates of a param or state: a copy step each, or computed in place of the target
	}{
		{"grad", []string{digitsMLP}, "", 0, 0},
		{"sgd", []string{"-optimizer", "sgd", digitsMLP}, "sgd", 0, 4},
		{"sgd after the file", []string{digitsMLP, "-optimizer", "sgd"}, "sgd", 0, 4},
		{"sgd momentum", []string{"-optimizer", "sgd", "-momentum", "0.9", digitsMLP}, "sgd", 0.9, 8},
		{"adam", []string{"-optimizer", "adam", digitsMLP}, "adam", 0, 14},
		{"linreg", []string{writeFile(t, "linreg.kir", linregKir)}, "", 0, 0},
		{"linreg adam", []string{"-optimizer", "adam", writeFile(t, "linreg.kir", linregKir)}, "adam", 0, 5},
		{"no params", []string{writeFile(t, "forward.kir", noParamsKir)}, "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runKiln(t, append([]string{"plan"}, tt.args...)...)
			r.want(t, 0)
			if r.stderr != "" {
				t.Errorf("unexpected stderr:\n%s", r.stderr)
			}
			containsAll(t, "plan output", r.stdout, "arena ", "lower bound ", "ratio ", "\nsteps:\n", "\nbuffers:\n", "\nsignature:\n")
			pp := parsePlanOutput(t, r.stdout)
			if got := strings.Join(pp.sections, " "); got != "buffers steps signature" {
				t.Errorf("sections %q, want buffers steps signature", got)
			}
			if len(pp.bufs) != pp.buffers {
				t.Errorf("%d buffer lines, the header says %d buffers", len(pp.bufs), pp.buffers)
			}
			if len(pp.stepLines) != pp.steps {
				t.Errorf("%d step lines, the header says %d steps", len(pp.stepLines), pp.steps)
			}
			// An update is a copy step, or its value is computed in the
			// memory of the param or state it updates.
			role := map[string]string{}
			for i, b := range pp.bufs {
				role[b.Name] = pp.roles[i]
			}
			direct := 0
			for _, of := range pp.inPlaceOf {
				if role[of] == "param" || role[of] == "state" {
					direct++
				}
			}
			if len(pp.copyLines)+direct != tt.updates {
				t.Errorf("%d copy steps and %d values computed in place of their param or state, want %d updates: %q", len(pp.copyLines), direct, tt.updates, pp.copyLines)
			}
			// A copy comes after the step that computes its value and after
			// every kernel that reads its target: no kernel sees a param
			// half-updated.
			for i, s := range pp.stepLines {
				m := copyStep.FindStringSubmatch(s)
				if m == nil {
					continue
				}
				target, value := "%"+m[1], "%"+m[2]
				defined := false
				for _, prev := range pp.stepLines[:i] {
					defined = defined || strings.HasPrefix(prev, value+":")
				}
				if !defined {
					t.Errorf("copy step %d %q before the step that computes %s", i, s, value)
				}
				for _, later := range pp.stepLines[i+1:] {
					reads := strings.Contains(later, " "+target+",") || strings.Contains(later, " "+target+" {") || strings.HasSuffix(later, " "+target)
					if !copyStep.MatchString(later) && reads {
						t.Errorf("copy step %d %q before %q, which reads %s", i, s, later, target)
					}
				}
			}

			// The printed numbers are consistent with each other.
			if pp.lower > pp.arena {
				t.Errorf("lower bound %d above the arena %d", pp.lower, pp.arena)
			}
			if pp.lower > 0 {
				if want := float64(pp.arena) / float64(pp.lower); math.Abs(pp.ratio-want) > 0.0005 {
					t.Errorf("ratio %.3f, want arena/lower bound = %.4f", pp.ratio, want)
				}
			}
			// A buffer that takes another's memory in place is live at
			// the step where that one dies (or, for an update's value, from
			// then on in the memory of its param or state, live to the end):
			// the memory counts once.
			index := map[string]int{}
			for i, b := range pp.bufs {
				index[b.Name] = i
			}
			var lower int64
			for s := 0; s < max(pp.steps, 1); s++ {
				var live int64
				for i, b := range pp.bufs {
					if b.Start > s || s > b.End {
						continue
					}
					if of := pp.inPlaceOf[i]; of != "" && pp.bufs[index[of]].Start <= s && s <= pp.bufs[index[of]].End {
						continue
					}
					live += alignedSize(b.Size)
				}
				lower = max(lower, live)
			}
			if lower != pp.lower {
				t.Errorf("the printed live ranges give a lower bound of %d bytes, the plan says %d", lower, pp.lower)
			}
			for i, b := range pp.bufs {
				if b.Offset%planner.Align != 0 || b.Offset+b.Size > pp.arena {
					t.Errorf("buffer %%%s at offset %d size %d: unaligned or outside the %d-byte arena", b.Name, b.Offset, b.Size, pp.arena)
				}
				for j, c := range pp.bufs[i+1:] {
					if pp.inPlaceOf[i+1+j] == b.Name || pp.inPlaceOf[i] == c.Name {
						update := pp.roles[i] == "param" || pp.roles[i] == "state" // c is the new value of b
						if b.Offset != c.Offset || !update && b.End != c.Start && c.End != b.Start {
							t.Errorf("%%%s and %%%s share memory in place, but not their offset or the step one dies and the other is written", b.Name, c.Name)
						}
						continue
					}
					if b.Size > 0 && c.Size > 0 && b.Start <= c.End && c.Start <= b.End &&
						b.Offset < c.Offset+c.Size && c.Offset < b.Offset+b.Size {
						t.Errorf("buffers %%%s and %%%s are live together and overlap in memory", b.Name, c.Name)
					}
				}
			}

			// Every buffer of the plan has its line, with its placement.
			p := compileLike(t, tt.args[indexOfKir(tt.args)], tt.optimizer, tt.momentum)
			if len(pp.bufs) != len(p.Buffers) {
				t.Fatalf("%d buffer lines, the plan has %d buffers", len(pp.bufs), len(p.Buffers))
			}
			for i, want := range p.Buffers {
				got := pp.bufs[i]
				alias := -1
				if pp.inPlaceOf[i] != "" {
					alias = index[pp.inPlaceOf[i]]
				}
				if alias != want.Alias {
					t.Errorf("buffer line %d: %%%s in place of buffer %d, want %d", i, got.Name, alias, want.Alias)
				}
				if got.Name != want.Name || pp.types[i] != want.Type.String() || pp.roles[i] != want.Role.String() ||
					got.Offset != want.Offset || got.Size != want.Size || got.Start != want.Start || got.End != want.End {
					t.Errorf("buffer line %d: %%%s %s %s offset %d size %d live %d..%d, want %%%s %s %s offset %d size %d live %d..%d",
						i, got.Name, pp.types[i], pp.roles[i], got.Offset, got.Size, got.Start, got.End,
						want.Name, want.Type, want.Role, want.Offset, want.Size, want.Start, want.End)
				}
			}
			if len(pp.stepLines) != len(p.Steps) || pp.arena != p.ArenaBytes || pp.lower != p.LowerBound {
				t.Errorf("printed %d steps, arena %d, lower bound %d; the plan has %d, %d, %d",
					len(pp.stepLines), pp.arena, pp.lower, len(p.Steps), p.ArenaBytes, p.LowerBound)
			}
			for _, n := range append(append([]planner.Named(nil), p.Outputs...), p.Grads...) {
				kind := "output"
				if strings.HasPrefix(n.Name, "grad/") {
					kind = "grad"
				}
				containsAll(t, "signature", r.stdout, fmt.Sprintf("  %-7s %s: %s\n", kind, n.Name, p.Buffers[n.Buffer].Type))
			}
			if t.Failed() {
				t.Logf("output:\n%s", r.stdout)
			}
		})
	}
}

// TestPlanReport checks kiln plan -report: the summary lines agree with the
// plan, the largest buffers come largest first, and the in-place count is
// the plan's.
func TestPlanReport(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args      []string
		optimizer string
		o0        bool // -O0: elementwise ops stay unfused, so some run in place
	}{
		{[]string{"-report", "-optimizer", "adam", digitsMLP}, "adam", false},
		{[]string{"-report", digitsMLP}, "", false},
		{[]string{"-report", "-O0", digitsMLP}, "", true},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runKiln(t, append([]string{"plan"}, tt.args...)...)
			r.want(t, 0)
			if r.stderr != "" {
				t.Errorf("unexpected stderr:\n%s", r.stderr)
			}
			p := compileLike(t, digitsMLP, tt.optimizer, 0)
			if tt.o0 {
				g, _, err := loadGraph(digitsMLP, nil)
				if err != nil {
					t.Fatal(err)
				}
				if p, err = kiln.Compile(g, kiln.Options{Grad: true, O0: true}); err != nil {
					t.Fatal(err)
				}
			}
			kernels := 0
			for _, st := range p.Steps {
				if st.Kind == planner.Kernel {
					kernels++
				}
			}
			inPlace := 0
			for _, b := range p.Buffers {
				if b.Alias >= 0 {
					inPlace++
				}
			}
			var params int64
			for _, i := range p.Params {
				params += p.Buffers[i].Size
			}
			containsAll(t, "report", r.stdout,
				fmt.Sprintf("plan digits_mlp: %d steps (%d kernels, %d copies), %d buffers\n", len(p.Steps), kernels, len(p.Steps)-kernels, len(p.Buffers)),
				fmt.Sprintf("arena %d bytes, lower bound %d bytes, ratio %.3f\n", p.ArenaBytes, p.LowerBound, p.Ratio()),
				fmt.Sprintf("params %d bytes (%d), ", params, len(p.Params)),
				"\nlargest buffers:\n",
				fmt.Sprintf("\nin place: %d results take the memory of an argument that dies there", inPlace))
			if strings.Contains(r.stdout, "\nsteps:\n") {
				t.Errorf("the report lists the steps:\n%s", r.stdout)
			}
			if tt.o0 && inPlace == 0 {
				t.Errorf("no result computed in place in the digits MLP at -O0")
			}
			var sizes []int64
			largest := regexp.MustCompile(`(?m)^  %\S+\s+\S+\s+(?:temp|input|param|state)\s+(\d+) bytes  offset`)
			for _, m := range largest.FindAllStringSubmatch(r.stdout, -1) {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				sizes = append(sizes, n)
			}
			if len(sizes) == 0 || !slices.IsSortedFunc(sizes, func(a, b int64) int { return int(b - a) }) {
				t.Errorf("largest buffers %v: not listed largest first\n%s", sizes, r.stdout)
			}
		})
	}
}

func indexOfKir(args []string) int {
	for i, a := range args {
		if strings.HasSuffix(a, ".kir") {
			return i
		}
	}
	return -1
}

// compileLike compiles path as kiln plan does: with the gradient when the
// graph has params and with the default optimizer of kind, if any, with
// momentum.
func compileLike(t *testing.T, path, kind string, momentum float64) *planner.Plan {
	t.Helper()
	g, _, err := loadGraph(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := kiln.Options{Grad: len(g.Params()) > 0}
	if kind != "" {
		c, err := passes.DefaultOptimizer(kind)
		if err != nil {
			t.Fatal(err)
		}
		c.Momentum = momentum
		opts.Optimizer = &c
	}
	p, err := kiln.Compile(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPlanErrors(t *testing.T) {
	t.Parallel()
	bad := writeFile(t, "bad.kir", "graph bad\ninput %x: f64[2]\n%y = relu %x %x\noutput %y\n")
	tests := []struct {
		name string
		args []string
		code int
		msg  []string
	}{
		{"missing file", []string{"nosuch.kir"}, 1, []string{"nosuch.kir", "no such file"}},
		{"parse error", []string{bad}, 1, []string{bad + ":3:"}},
		{"bad optimizer", []string{"-optimizer", "nope", digitsMLP}, 2, []string{`unknown optimizer "nope"`}},
		{"bad momentum", []string{"-optimizer", "sgd", "-momentum", "1", digitsMLP}, 2, []string{"momentum must be in [0,1)"}},
		{"bad adam eps", []string{"-optimizer", "adam", "-eps", "-1", digitsMLP}, 2, []string{"adam eps must be positive"}},
		{"bad clip-grad", []string{"-optimizer", "adam", "-clip-grad", "-100", digitsMLP}, 2, []string{"gradient clip must be finite and >= 0", "-100"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runKiln(t, append([]string{"plan"}, tt.args...)...)
			r.want(t, tt.code)
			msg := r.stderr
			if tt.code == 1 {
				msg = oneLine(t, r.stderr)
			}
			containsAll(t, "stderr", msg, append([]string{"kiln plan: "}, tt.msg...)...)
			if r.stdout != "" {
				t.Errorf("unexpected stdout:\n%s", r.stdout)
			}
		})
	}
}
