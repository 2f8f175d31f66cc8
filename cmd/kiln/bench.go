package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/internal/atomicfile"
	"github.com/kilnml/kiln/internal/sysmem"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	kcpu "github.com/kilnml/kiln/kernels/cpu"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// runBench implements kiln bench: it compiles a model as the other commands
// do (with the gradient when it has params, the update with -optimizer),
// fills its inputs with random values, runs -warmup untimed steps and then
// -steps timed ones, and prints the plan's size, the median step time with
// its range, the throughput, the estimated memory traffic, the plan's FLOPs
// per step with the rate achieved and its fraction of the peak measured on
// as many goroutines as workers, at most one per CPU. With -trace it then
// runs one more step with the executor's trace on and writes its timeline.
func runBench(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cflags := addCompileFlags(fs, withOptimizer|withRecompute)
	batch := fs.Int("batch", 0, "set every input's first dimension to N and re-infer the types (default: as the model says)")
	steps := fs.Int("steps", 20, "timed steps")
	warmup := fs.Int("warmup", 3, "untimed steps before the timed ones")
	seed := fs.Uint64("seed", 1, "seed of the random inputs and the param initialization")
	workers := addWorkersFlag(fs)
	device := addDeviceFlag(fs)
	matmulN := fs.Int("matmul", 0, "with -device gpu: the size N of the N×N×N f32 matmul timed on the device for its GFLOP/s (default 4096 on a hardware GPU, 256 on a software adapter)")
	peakGFLOPS := fs.Float64("peak-gflops", 0, "with -device gpu: the device's stated f32 peak in GFLOP/s (e.g. 66900 for an H200 SXM); the matmul rate is also printed as a fraction of it")
	tracePath := fs.String("trace", "", "after the timed steps, run one more and write its timeline to `FILE.json` (Chrome trace events: one row per worker; open in Perfetto or chrome://tracing)")
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	path, err := oneFile(pos, "FILE.kir")
	if err != nil {
		return err
	}
	switch {
	case *steps < 1:
		return usagef("-steps must be at least 1, found %d", *steps)
	case *warmup < 0:
		return usagef("-warmup must not be negative, found %d", *warmup)
	case *batch < 0:
		return usagef("-batch must be at least 1, found %d", *batch)
	case *matmulN < 0:
		return usagef("-matmul must be at least 1, found %d", *matmulN)
	case *peakGFLOPS < 0:
		return usagef("-peak-gflops must be positive, found %g", *peakGFLOPS)
	case *peakGFLOPS > 0 && *device != "gpu":
		return usagef("-peak-gflops states a GPU's peak; it needs -device gpu")
	}
	if err := checkRun(*workers, *device); err != nil {
		return err
	}
	if *device == "gpu" && *tracePath != "" {
		return usagef("-trace times the CPU executor's workers; it needs -device cpu")
	}
	if err := checkFiles([]fileArg{{"FILE.kir", path}}, []fileArg{{"-trace", *tracePath}}); err != nil {
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
	if *batch > 0 {
		if err := rebatch(g, *batch); err != nil {
			return fail(path, "%v", err)
		}
	}
	p, err := compileFor(path, g, opts, *device)
	if err != nil {
		return err
	}
	x, err := kiln.NewExecutor(p, kiln.ExecOptions{Device: *device, Seed: *seed, CheckNaN: opts.Debug.NaN, Workers: *workers})
	if err != nil {
		return fail(path, "%v", err)
	}
	defer x.Close()
	if err := checkFeedMemory(g, p, *device); err != nil {
		return fail(path, "%v", err)
	}
	// Labels and indices are drawn in range from the ops that read them in
	// the source graph (fusion may hide those ops in the compiled one).
	feeds := kiln.RandomFeeds(g, *seed)
	for _, i := range p.Inputs {
		name := p.Buffers[i].Name
		t := kernels.New(p.Buffers[i].Type)
		if err := kernels.SetFloat64s(t, feeds[name]); err != nil {
			return fail(path, "input %%%s: %v", name, err)
		}
		if err := x.Set(name, t); err != nil {
			return err
		}
	}
	ctx := context.Background()
	for range *warmup {
		if err := x.Step(ctx); err != nil {
			return fail(path, "%v", err)
		}
	}
	runtime.GC()
	times := make([]time.Duration, *steps)
	for i := range times {
		start := time.Now()
		if err := x.Step(ctx); err != nil {
			return fail(path, "%v", err)
		}
		times[i] = time.Since(start)
	}
	r := benchResult{
		Model: g.Name, File: path, Compile: benchCompile(opts), Batch: batchOf(p), Rebatched: *batch > 0,
		Steps: len(p.Steps), Buffers: len(p.Buffers), Arena: p.ArenaBytes, LowerBound: p.LowerBound,
		Warmup: *warmup, Times: times, Traffic: traffic(p), FLOPs: planFLOPs(p),
	}
	if cx, ok := x.(*cpu.Executor); ok {
		if *tracePath != "" {
			if err := writeTrace(ctx, cx, *tracePath); err != nil {
				return fail(path, "%v", err)
			}
		}
		r.Workers = cx.Workers()
		r.Peak = measurePeak(cx.Workers(), 100*time.Millisecond)
	} else {
		gx := x.(*gpu.Executor)
		r.Device = gx.Device()
		if r.Peak, r.MatmulN, err = gpuMatmulGFLOPS(*matmulN, 5, gx.Software()); err != nil {
			return fail(path, "timing the %d³ matmul: %v", *matmulN, err)
		}
		r.DevicePeak = *peakGFLOPS
	}
	_, err = io.WriteString(stdout, r.Format())
	return err
}

// rebatch sets the first dimension of every input of rank at least 1 to n
// and re-infers every computed type (passes.Shapes). A value whose
// attributes spell the old batch size, like a reshape to a literal shape,
// makes the inference fail; the error names it.
func rebatch(g *ir.Graph, n int) error {
	for _, id := range g.Inputs() {
		v := g.Value(id)
		if len(v.Type.Shape) == 0 {
			continue
		}
		s := v.Type.Shape.Clone()
		s[0] = n
		v.Type.Shape = s
		if _, err := v.Type.BytesChecked(); err != nil {
			return fmt.Errorf("-batch %d: input %s: %v", n, g.NameOf(id), err)
		}
	}
	if err := passes.Shapes(g); err != nil {
		return fmt.Errorf("-batch %d: the graph does not re-batch: %v (an attribute that spells the batch size, like a reshape's shape, does not follow -batch)", n, err)
	}
	return nil
}

// checkFeedMemory refuses random inputs that do not fit in the memory
// available beside the arena, before they are drawn: a float64 per element
// of every input and param, and a tensor per input. The arena, allocated but
// not yet written, does not show in the memory available, so it is counted
// here on the CPU.
func checkFeedMemory(g *ir.Graph, p *planner.Plan, device string) error {
	var n int64
	for _, v := range g.Values {
		if v.Op == ir.OpInput || v.Op == ir.OpParam {
			n += 8 * int64(v.Type.Shape.NumElements())
		}
		if v.Op == ir.OpInput {
			n += int64(v.Type.Bytes())
		}
	}
	what := "random inputs"
	if device != "gpu" {
		n += p.ArenaBytes
		what = "arena and random inputs"
	}
	return sysmem.Check(what, n)
}

// batchOf returns the batch size of a plan: the first dimension of its first
// input of rank at least 1, or 1 when it has none.
func batchOf(p *planner.Plan) int {
	for _, i := range p.Inputs {
		if s := p.Buffers[i].Type.Shape; len(s) > 0 {
			return s[0]
		}
	}
	return 1
}

// traffic estimates the bytes one step moves: for every step of the plan,
// the sizes of the buffers it reads (each argument, as often as it is one)
// and of the buffer it writes. The update copies count like kernels. It is
// read from the plan alone, as if every buffer were read once per use and
// no cache helped: a model of the traffic, not a measurement, in which
// fusion, which removes intermediate buffers, visibly lowers the total.
func traffic(p *planner.Plan) int64 {
	var n int64
	for _, st := range p.Steps {
		for _, a := range st.Args {
			n += p.Buffers[a].Size
		}
		n += p.Buffers[st.Out].Size
	}
	return n
}

// planFLOPs returns the floating-point operations of one step of p: the
// cost model's price (checkpoint.FLOPs) of every kernel step's value;
// copies cost nothing.
func planFLOPs(p *planner.Plan) float64 {
	var n float64
	for _, st := range p.Steps {
		if st.Kind != planner.Copy {
			n += checkpoint.FLOPs(p.Graph, ir.ID(st.Out))
		}
	}
	return n
}

// peakCores returns the goroutines the peak is measured on for workers:
// one per worker, but no more than the CPUs, since workers beyond them
// share cores and add no floating-point rate.
func peakCores(workers int) int { return max(1, min(workers, runtime.NumCPU())) }

// measurePeak runs kernels/cpu.PeakGFLOPS (the f32 gemm micro-kernel on
// L1-resident panels) on peakCores(workers) goroutines at once for d and
// returns the sum of their rates in GFLOP/s: the most the machine gives
// kiln's matmul with that many workers, as measured now (other load on the
// machine lowers it, as it lowers the step).
func measurePeak(workers int, d time.Duration) float64 {
	rates := make([]float64, peakCores(workers))
	var wg sync.WaitGroup
	wg.Add(len(rates))
	for i := range rates {
		go func() {
			defer wg.Done()
			rates[i] = kcpu.PeakGFLOPS(d)
		}()
	}
	wg.Wait()
	var sum float64
	for _, r := range rates {
		sum += r
	}
	return sum
}

// traceEvent is one Chrome trace event (the JSON Object Format that
// Perfetto and chrome://tracing read): ph "X" is a complete event with its
// start ts and duration dur in microseconds; ph "M" names a row.
type traceEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// writeTrace runs one step of x with its trace on and writes the timeline
// to path atomically: one complete event per step of the plan, named by its
// op and value ("matmul %h", "copy %w"), on the row (tid) of the worker that
// ran it, with times relative to the step's start; and a name for each
// worker's row.
func writeTrace(ctx context.Context, x *cpu.Executor, path string) error {
	p := x.Plan()
	type span struct {
		worker     int
		start, end time.Time
	}
	// Each step is run, so reported, by one goroutine: no lock is needed.
	spans := make([]span, len(p.Steps))
	x.Trace(func(step, worker int, start, end time.Time) {
		spans[step] = span{worker, start, end}
	})
	t0 := time.Now()
	if err := x.Step(ctx); err != nil {
		return err
	}
	events := make([]traceEvent, 0, len(p.Steps)+x.Workers())
	for w := range x.Workers() {
		events = append(events, traceEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: w, Args: map[string]any{"name": fmt.Sprintf("worker %d", w)}})
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	for s, st := range p.Steps {
		name := st.Op.String() + " %" + p.Buffers[st.Out].Name
		if st.Kind == planner.Copy {
			name = "copy %" + p.Buffers[st.Out].Name
		}
		sp := spans[s]
		events = append(events, traceEvent{
			Name: name, Ph: "X", Ts: us(sp.start.Sub(t0)), Dur: us(sp.end.Sub(sp.start)), Pid: 1, Tid: sp.worker,
			Args: map[string]any{"step": s},
		})
	}
	data, err := json.Marshal(struct {
		TraceEvents     []traceEvent `json:"traceEvents"`
		DisplayTimeUnit string       `json:"displayTimeUnit"`
	}{events, "ms"})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'))
}

// benchCompile describes how the plan was compiled, for the report.
func benchCompile(opts kiln.Options) string {
	passes := "default passes"
	if opts.O0 {
		passes = "-O0 (without simplify and fuse)"
	}
	switch {
	case opts.Optimizer != nil:
		return passes + "; forward, backward and " + opts.Optimizer.Kind + " update"
	case opts.Grad:
		return passes + "; forward and backward"
	}
	return passes + "; forward"
}

// benchResult is what kiln bench measured.
type benchResult struct {
	Model, File, Compile string
	Batch                int
	Rebatched            bool // -batch set the batch size
	Steps, Buffers       int
	Arena, LowerBound    int64
	Warmup               int
	Workers              int             // goroutines running the steps
	Times                []time.Duration // the timed steps
	Traffic              int64           // estimated bytes per step
	FLOPs                float64         // the cost model's floating-point operations per step
	Peak                 float64         // GFLOP/s measured on peakCores(Workers) goroutines, or of the GPU's matmul
	Device               string          // the GPU, or "" on the CPU
	MatmulN              int             // the GPU matmul's size
	DevicePeak           float64         // the GPU's stated f32 peak in GFLOP/s (-peak-gflops), or 0
}

// median returns the median of the timed steps (the mean of the middle two
// for an even count), and the fastest and slowest.
func (r *benchResult) median() (med, lo, hi time.Duration) {
	t := slices.Clone(r.Times)
	slices.Sort(t)
	n := len(t)
	med = t[n/2]
	if n%2 == 0 {
		med = (t[n/2-1] + t[n/2]) / 2
	}
	return med, t[0], t[n-1]
}

// Format prints the result, one "key value" line per figure; bench/run.sh
// reads the median and traffic lines, whose values are plain numbers in a
// fixed unit.
func (r *benchResult) Format() string {
	med, lo, hi := r.median()
	var b strings.Builder
	line := func(key, format string, args ...any) {
		fmt.Fprintf(&b, "%-10s %s\n", key, fmt.Sprintf(format, args...))
	}
	line("model", "%s (%s)", r.Model, r.File)
	line("compile", "%s", r.Compile)
	if r.Rebatched {
		line("batch", "%d (-batch)", r.Batch)
	} else {
		line("batch", "%d", r.Batch)
	}
	line("plan", "%d steps, %d buffers", r.Steps, r.Buffers)
	line("arena", "%d bytes (lower bound %d)", r.Arena, r.LowerBound)
	if r.Device != "" {
		line("device", "gpu: %s", r.Device)
	} else {
		line("workers", "%d", r.Workers)
	}
	line("runs", "%d warmup, %d timed steps", r.Warmup, len(r.Times))
	line("median", "%s ms", ms(med))
	line("range", "%s - %s ms", ms(lo), ms(hi))
	line("samples/s", "%.0f", float64(r.Batch)/med.Seconds())
	line("traffic", "%.3f MB per step (%d bytes), %.2f GB/s", float64(r.Traffic)/1e6, r.Traffic, float64(r.Traffic)/med.Seconds()/1e9)
	rate := r.FLOPs / med.Seconds() / 1e9
	line("flops", "%.4f GFLOP per step (%.0f)", r.FLOPs/1e9, r.FLOPs)
	line("GFLOP/s", "%.2f", rate)
	if r.Device != "" {
		line("matmul", "%.2f GFLOP/s (f32 %d×%d×%d on the device, best of 5)", r.Peak, r.MatmulN, r.MatmulN, r.MatmulN)
		if r.DevicePeak > 0 {
			line("of device", "%.1f%% of the stated f32 peak (%.0f GFLOP/s)", 100*r.Peak/r.DevicePeak, r.DevicePeak)
		}
	} else {
		line("peak", "%.2f GFLOP/s (f32 gemm micro-kernel on %d cores)", r.Peak, peakCores(r.Workers))
	}
	if r.Peak > 0 {
		line("of peak", "%.1f%%", 100*rate/r.Peak) // on the GPU: of its matmul rate
	} else {
		line("of peak", "unknown")
	}
	return b.String()
}

// ms formats d in milliseconds with four significant digits and no
// exponent.
func ms(d time.Duration) string {
	v := d.Seconds() * 1e3
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 10:
		return fmt.Sprintf("%.2f", v)
	case v >= 1:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.4f", v)
}

// gpuMatmulGFLOPS times an n×n×n f32 matmul on the GPU, reps times after
// one untimed run, each a step of its own (submitted and waited for; only
// a sum of the product, 4 bytes, is read back), and returns the best rate
// in GFLOP/s (2n³ operations per product), with the n it used. n 0 means
// 4096 on a hardware GPU and 256 on a software adapter, which takes
// seconds per product from 512 on.
func gpuMatmulGFLOPS(n, reps int, software bool) (float64, int, error) {
	if n <= 0 {
		n = 4096
		if software {
			n = 256
		}
	}
	src := fmt.Sprintf("graph matmul\ninput %%a: f32[%d,%d]\ninput %%b: f32[%d,%d]\n%%y = matmul %%a, %%b\n%%s = sum %%y\noutput %%s\n", n, n, n, n)
	g, err := ir.Parse("matmul.kir", []byte(src))
	if err != nil {
		return 0, n, err
	}
	p, err := planner.New(g, planner.Options{})
	if err != nil {
		return 0, n, err
	}
	x, err := kiln.NewExecutor(p, kiln.ExecOptions{Device: "gpu"})
	if err != nil {
		return 0, n, err
	}
	defer x.Close()
	ctx := context.Background()
	if err := x.Step(ctx); err != nil {
		return 0, n, err
	}
	best := time.Duration(1 << 62)
	for range max(reps, 1) {
		start := time.Now()
		if err := x.Step(ctx); err != nil {
			return 0, n, err
		}
		best = min(best, time.Since(start))
	}
	return 2 * float64(n) * float64(n) * float64(n) / best.Seconds() / 1e9, n, nil
}
