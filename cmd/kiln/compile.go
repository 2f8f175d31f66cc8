package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/internal/sysmem"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// loadGraph reads and parses a .kir file, or imports an ONNX model (a
// FILE.onnx) with the import options mf gives (nil: none), and returns the
// graph with the initial values of params and state the file carries (an
// ONNX model's initializers, its BatchNorm running statistics included;
// none for .kir). A file larger than the memory available is
// refused before it is read, and a .kir file refuses the ONNX import
// options; its params that -freeze or -train selects are marked frozen.
func loadGraph(path string, mf *modelFlags) (*ir.Graph, []safetensors.Tensor, error) {
	g, params, _, err := loadModel(path, mf)
	return g, params, err
}

// loadModel is loadGraph that also returns the import of an ONNX model (nil
// for .kir), which writes the trained model back (-save-onnx).
func loadModel(path string, mf *modelFlags) (*ir.Graph, []safetensors.Tensor, *onnx.Model, error) {
	o, err := mf.options()
	if err != nil {
		return nil, nil, nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		if err := sysmem.Check("file", fi.Size()); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if isONNX(path) {
		m, err := o.Import(path)
		if err != nil {
			return nil, nil, nil, err
		}
		m.Graph.File = path // later errors name the model file
		return m.Graph, slices.Concat(m.Params, m.States), m, nil
	}
	if given := mf.onnxOnly(); len(given) > 0 {
		return nil, nil, nil, usagef("%s is for ONNX models; %s is not a .onnx file", strings.Join(given, ", "), path)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	g, err := ir.Parse(path, src)
	if err != nil {
		return nil, nil, nil, err
	}
	return g, nil, nil, mf.freezeKIR(path, g)
}

// compileFor compiles g, read from path, with opts for device: a plan for
// the GPU is placed in chunks of its largest storage binding.
func compileFor(path string, g *ir.Graph, opts kiln.Options, device string) (*planner.Plan, error) {
	c, err := kiln.ChunkBytes(device)
	if err != nil {
		return nil, fail(path, "planning for the %s: %v", device, err)
	}
	opts.Plan.ChunkBytes = c
	return kiln.Compile(g, opts)
}

// isONNX reports whether path names an ONNX model (FILE.onnx).
func isONNX(path string) bool { return strings.EqualFold(filepath.Ext(path), ".onnx") }

// setModelParams sets the params and state of t to the initial values its
// model file carries (params, from loadGraph). They are set before -init, -resume or
// -inputs, which override them.
func setModelParams(t *kiln.Trainer, params []safetensors.Tensor) error {
	x := t.Executor()
	for _, p := range params {
		if err := x.Set(p.Name, kernels.Tensor{Type: p.Type, Data: p.Data}); err != nil {
			return err
		}
	}
	return nil
}

// optimizerFlags are the flags that choose the optimizer update.
type optimizerFlags struct {
	kind                      string
	lr, momentum, weightDecay float64
	dampening                 float64
	nesterov, amsgrad         bool
	beta1, beta2, eps         float64
	alpha                     float64
	centered                  bool
	clipGrad, clipNorm        float64
	schedule                  string // the schedule's flags, on kiln train, compile and step
	warmup, stepSize          int64
	gamma                     float64
	accum                     int64 // -accum, on kiln train, compile and step
	defaultKind               string
	fs                        *flag.FlagSet   // tells which flags were given
	own                       map[string]bool // the names of these flags
}

func addOptimizerFlags(fs *flag.FlagSet, defaultKind string) *optimizerFlags {
	o := &optimizerFlags{defaultKind: defaultKind, fs: fs, accum: 1}
	defer o.claim(fs)()
	kinds := strings.Join(passes.OptimizerKinds, ", ")
	what := "append the optimizer update: " + kinds + " (torch.optim's SGD, Adam, AdamW, RMSprop)"
	if defaultKind != "" {
		what = "optimizer: " + kinds + " (torch.optim's SGD, Adam, AdamW, RMSprop)"
	}
	fs.StringVar(&o.kind, "optimizer", defaultKind, what)
	fs.Float64Var(&o.lr, "lr", 0, "learning rate (default: sgd and rmsprop 0.01, adam and adamw 0.001)")
	fs.Float64Var(&o.momentum, "momentum", 0, "sgd and rmsprop momentum")
	fs.Float64Var(&o.dampening, "dampening", 0, "sgd: the gradient enters the momentum buffer scaled by 1 - dampening (after the first step)")
	fs.BoolVar(&o.nesterov, "nesterov", false, "sgd: Nesterov momentum (needs -momentum, and -dampening 0)")
	fs.Float64Var(&o.weightDecay, "weight-decay", 0, "weight decay: for adamw decoupled, p -= lr*wd*p before the update (default 0.01); for the others an L2 penalty added to the gradient (default 0)")
	fs.Float64Var(&o.beta1, "beta1", 0.9, "adam and adamw first-moment decay")
	fs.Float64Var(&o.beta2, "beta2", 0.999, "adam and adamw second-moment decay")
	fs.BoolVar(&o.amsgrad, "amsgrad", false, "adam and adamw: divide by the root of the largest second moment so far (AMSGrad)")
	fs.Float64Var(&o.eps, "eps", 1e-8, "adam, adamw and rmsprop epsilon")
	fs.Float64Var(&o.alpha, "alpha", 0.99, "rmsprop: decay of the mean square")
	fs.BoolVar(&o.centered, "centered", false, "rmsprop: divide by the root of the variance of the gradient (mean square less squared mean)")
	fs.Float64Var(&o.clipGrad, "clip-grad", 0, "clamp every gradient element to [-v, v] before the update (0: no clipping)")
	fs.Float64Var(&o.clipNorm, "clip-norm", 0, "scale the gradients by min(1, x/(norm+1e-6)) before the update, norm being that of all of them together (torch.nn.utils.clip_grad_norm_; 0: no clipping)")
	return o
}

// config returns the chosen optimizer, or nil when none was asked for.
func (o *optimizerFlags) config() (*passes.OptimizerConfig, error) {
	if o.kind == "" {
		var set []string
		o.fs.Visit(func(f *flag.Flag) {
			if o.own[f.Name] && f.Name != "optimizer" {
				set = append(set, "-"+f.Name)
			}
		})
		if len(set) > 0 {
			return nil, usagef("%s: set with -optimizer KIND, which appends the update they configure", strings.Join(set, ", "))
		}
		return nil, nil
	}
	c, err := passes.DefaultOptimizer(o.kind)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	if o.lr != 0 {
		c.LR = o.lr
	}
	c.Momentum, c.ClipGrad, c.ClipNorm = o.momentum, o.clipGrad, o.clipNorm
	c.Schedule, c.Warmup, c.Accum = o.schedule, o.warmup, o.accum
	if o.accum < 1 {
		return nil, usagef("-accum must be at least 1 batch an update, found %d", o.accum)
	}
	if c.Schedule == "step" {
		c.StepSize, c.Gamma = o.stepSize, o.gamma
	} else if o.given("lr-step-size") || o.given("lr-gamma") {
		return nil, usagef("-lr-step-size and -lr-gamma are for -lr-schedule step")
	}
	c.Dampening, c.Nesterov, c.AMSGrad, c.Centered = o.dampening, o.nesterov, o.amsgrad, o.centered
	if c.Kind != "adamw" || o.given("weight-decay") {
		c.WeightDecay = o.weightDecay
	}
	switch {
	case c.IsAdam():
		c.Beta1, c.Beta2, c.Eps = o.beta1, o.beta2, o.eps
	case c.Kind == "rmsprop":
		c.Alpha, c.Eps = o.alpha, o.eps
	}
	if err := c.Validate(); err != nil {
		return nil, usageError{err.Error()}
	}
	return &c, nil
}

// addScheduleFlags adds the flags of the learning-rate schedule and of
// gradient accumulation, which kiln train, compile and step take.
func (o *optimizerFlags) addScheduleFlags(fs *flag.FlagSet) {
	defer o.claim(fs)()
	fs.StringVar(&o.schedule, "lr-schedule", "constant", "learning-rate schedule: "+strings.Join(passes.Schedules, ", ")+"; computed in the plan from a step counter kept in its state")
	fs.Int64Var(&o.warmup, "warmup", 0, "steps of linear warmup before the schedule: the learning rate of step t < W is lr*t/W")
	fs.Int64Var(&o.stepSize, "lr-step-size", 0, "-lr-schedule step: steps between decays (after the warmup)")
	fs.Float64Var(&o.gamma, "lr-gamma", 0.1, "-lr-schedule step: the factor of each decay")
	fs.Int64Var(&o.accum, "accum", 1, "batches per update: the update uses the mean of their gradients, summed in batch order (gradient accumulation)")
}

// claim returns the function that, called after flags are added to fs,
// records them as o's: the flags config refuses without -optimizer.
func (o *optimizerFlags) claim(fs *flag.FlagSet) func() {
	before := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
	return func() {
		if o.own == nil {
			o.own = map[string]bool{}
		}
		fs.VisitAll(func(f *flag.Flag) { o.own[f.Name] = o.own[f.Name] || !before[f.Name] })
	}
}

// given reports whether the flag name was set.
func (o *optimizerFlags) given(name string) bool {
	set := false
	o.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// debugSwitches reads KILN_DEBUG; a bad value is a usage error.
func debugSwitches() (passes.Debug, error) {
	d, err := passes.DebugFromEnv()
	if err != nil {
		return d, usageError{err.Error()}
	}
	return d, nil
}

// maxWorkers is the most -workers a command takes: past a few per core,
// more goroutines only add scheduling, and a huge count would take memory
// and time to start.
const maxWorkers = 256

// addWorkersFlag adds -workers, taken by every command that runs a plan.
func addWorkersFlag(fs *flag.FlagSet) *int {
	return fs.Int("workers", 0, fmt.Sprintf("goroutines that run the plan's steps, at most %d (default: the number of CPUs); results are the same for any number", maxWorkers))
}

// addDeviceFlag adds -device, taken by every command that runs a plan.
func addDeviceFlag(fs *flag.FlagSet) *string {
	return fs.String("device", "cpu", "where the plan runs: cpu or gpu (WebGPU: Vulkan, Metal, D3D12 or GL)")
}

// checkDevice rejects an unknown -device.
func checkDevice(d string) error {
	if !slices.Contains(kiln.Devices, d) {
		return usagef("-device must be cpu or gpu, found %q", d)
	}
	return nil
}

// checkWorkers rejects a negative -workers or one above maxWorkers.
func checkWorkers(n int) error {
	if n < 0 {
		return usagef("-workers must not be negative, found %d", n)
	}
	if n > maxWorkers {
		return usagef("-workers must be at most %d, found %d", maxWorkers, n)
	}
	return nil
}

// parseModelRun parses the flags of a command that runs one model file on
// the flags workers and device (grad, step, eval): it checks those two and
// returns the one FILE argument.
func parseModelRun(fs *flag.FlagSet, args []string, stdout io.Writer, workers *int, device *string) (string, error) {
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return "", err
	}
	if err := checkRun(*workers, *device); err != nil {
		return "", err
	}
	return oneFile(pos, "FILE.kir")
}

// checkRun checks -workers and -device, the flags of every command that
// runs a plan.
func checkRun(workers int, device string) error {
	if err := checkWorkers(workers); err != nil {
		return err
	}
	return checkDevice(device)
}

// compileFlags are the flags of a command that compiles a model: -O0, the
// model's (ONNX import and freezing) and, for the commands that take them,
// recomputation's (ckpt) and the optimizer's (opt).
type compileFlags struct {
	o0    *bool
	model *modelFlags
	ckpt  *checkpointFlags // nil: no -recompute, -memory-budget
	opt   *optimizerFlags  // nil: no update
	ranks *ranksFlags      // nil: no -ranks, -dist-bucket
}

// What a command's compileFlags hold beyond -O0 and the model flags.
const (
	withRecompute = 1 << iota // -recompute and -memory-budget
	withOptimizer             // the optimizer's flags; an update only with -optimizer
	withSchedule              // with withOptimizer: the schedule and accumulation flags
	withTraining              // the optimizer's, schedule and accumulation flags, with -optimizer adam by default
	withRanks                 // -ranks and -dist-bucket: compile for data-parallel training
)

// addCompileFlags adds the compile flags that with selects to fs.
func addCompileFlags(fs *flag.FlagSet, with int) *compileFlags {
	c := &compileFlags{o0: addO0Flag(fs), model: addModelFlags(fs)}
	switch {
	case with&withTraining != 0:
		c.opt = addOptimizerFlags(fs, "adam")
	case with&withOptimizer != 0:
		c.opt = addOptimizerFlags(fs, "")
	}
	if with&(withTraining|withSchedule) != 0 {
		c.opt.addScheduleFlags(fs)
	}
	if with&withRecompute != 0 {
		c.ckpt = addCheckpointFlags(fs)
	}
	if with&withRanks != 0 {
		c.ranks = addRanksFlags(fs)
	}
	return c
}

// optimizer returns the update the flags ask for (nil for none); bad
// values are usage errors.
func (c *compileFlags) optimizer() (*passes.OptimizerConfig, error) {
	if c.opt == nil {
		return nil, nil
	}
	return c.opt.config()
}

// checkUsage reports the usage errors of the recomputation flags, before
// any file is read.
func (c *compileFlags) checkUsage() error {
	if err := c.ranks.apply(&kiln.Options{}); err != nil {
		return err
	}
	if c.ckpt == nil {
		return nil
	}
	return c.ckpt.apply(&kiln.Options{})
}

// load reads the debug switches and the model at path and returns the
// graph, the params its file carries and the compile options: the
// gradient is taken when the graph has params, opt (if any) appends the
// update, and the flags set -O0 and recomputation.
func (c *compileFlags) load(path string, opt *passes.OptimizerConfig) (*ir.Graph, []safetensors.Tensor, kiln.Options, error) {
	g, params, opts, err := load(path, c.model, opt, *c.o0)
	if err == nil && c.ckpt != nil {
		err = c.ckpt.apply(&opts)
	}
	if err == nil {
		err = c.ranks.apply(&opts)
	}
	return g, params, opts, err
}

// addO0Flag adds -O0, taken by every command that compiles.
func addO0Flag(fs *flag.FlagSet) *bool {
	return fs.Bool("O0", false, "compile without the optimizing passes (canonicalize, simplify, fuse)")
}

// checkpointFlags are -recompute and -memory-budget, taken by every
// command that builds a plan.
type checkpointFlags struct {
	policy, budget string
}

func addCheckpointFlags(fs *flag.FlagSet) *checkpointFlags {
	c := &checkpointFlags{}
	fs.StringVar(&c.policy, "recompute", "", "recompute activations in the backward: sqrt, segments=K, manual (the graph's recompute marks, the default when it has any) or none")
	fs.StringVar(&c.budget, "memory-budget", "", "most bytes the plan's arena may take (536870912, 512MiB, 1.5GB): alone, recompute what fits it most cheaply; with -recompute, check it")
	return c
}

// apply checks the flags and sets them in opts; bad values are usage errors.
func (c *checkpointFlags) apply(opts *kiln.Options) error {
	if _, err := checkpoint.ParsePolicy(c.policy); err != nil {
		return usageError{"-recompute: " + err.Error()}
	}
	opts.Checkpoint = c.policy
	if c.budget != "" {
		n, err := checkpoint.ParseBytes(c.budget)
		if err != nil {
			return usageError{"-memory-budget: " + err.Error()}
		}
		opts.MemoryBudget = n
	}
	return nil
}

// active reports whether the flags ask for recomputation or a budget.
func (c *checkpointFlags) active() bool {
	return (c.policy != "" && c.policy != "none") || c.budget != ""
}

// meta records the flags in a plan file's metadata.
func (c *checkpointFlags) meta(m map[string]string, opts kiln.Options) {
	if c.policy != "" {
		m["checkpoint"] = c.policy
	}
	if opts.MemoryBudget > 0 {
		m["memory_budget"] = strconv.FormatInt(opts.MemoryBudget, 10)
	}
}

// load reads the debug switches and the graph at path and returns the
// compile options of commands that build a plan: the gradient is taken when
// the graph has params, opt (if any) appends the update, and o0 turns the
// optimizing passes off; mf are the model's import flags.
func load(path string, mf *modelFlags, opt *passes.OptimizerConfig, o0 bool) (*ir.Graph, []safetensors.Tensor, kiln.Options, error) {
	dbg, err := debugSwitches()
	if err != nil {
		return nil, nil, kiln.Options{}, err
	}
	g, params, err := loadGraph(path, mf)
	if err != nil {
		return nil, nil, kiln.Options{}, err
	}
	return g, params, kiln.Options{Grad: len(g.Params()) > 0, Optimizer: opt, Debug: dbg, O0: o0}, nil
}

func fail(path string, format string, args ...any) error {
	return fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
}
