// Command kiln compiles dataflow graphs (.kir files) into training plans and
// runs them: kiln dump, grad, plan, bench and train. Run kiln help for usage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/kilnml/kiln/ir"
)

// usageError marks errors in how kiln was called; they exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

type command struct {
	name, args, summary string
	run                 func(args []string, stdout io.Writer) error
}

var commands []command

func init() {
	commands = []command{
		{"dump", "[-after PASS|all] [-dot] [-html OUT.html] [-O0] [-optimizer sgd|adam|adamw|rmsprop] [-accum K] [-ranks N [-dist-shard]] [-recompute P] [-memory-budget B] FILE.kir", "print the IR after a pass (default: after the whole pipeline), or write every pass as one HTML page", runDump},
		{"grad", "FILE.kir -inputs IN.safetensors -out OUT.safetensors [-init P.safetensors] [-recompute P] [-memory-budget B]", "run the graph and its backward; write the outputs and grad/PARAM for every param not frozen", runGrad},
		{"step", "FILE.kir -inputs IN.safetensors -steps N -out OUT.safetensors [-optimizer sgd|adam|adamw|rmsprop] [-lr LR] [-lr-schedule S -warmup W] [-accum K] [-seed N] ...", "run N training steps on the one batch in IN; write every param after the last and loss, the f64 vector of the N losses (each before its update)", runStep},
		{"eval", "FILE.kir -inputs IN.safetensors -out OUT.safetensors [-init P.safetensors] [-device cpu|gpu]", "run the forward graph alone (no gradient, dropout off); write every output by name", runEval},
		{"import", "FILE.onnx -o FILE.kir", "write an ONNX model as a .kir graph, and its initializers (the params' initial values) as FILE.safetensors beside it", runImport},
		{"plan", "[-O0] [-report] [-optimizer sgd|adam|adamw|rmsprop] [-accum K] [-ranks N [-dist-shard]] [-recompute sqrt|segments=K] [-memory-budget BYTES] FILE.kir", "print the execution plan: steps, buffers with offsets, peak and lower bound (-report: a short memory report)", runPlan},
		{"bench", "[-O0] [-device cpu|gpu] [-matmul N] [-peak-gflops X] [-batch N] [-steps N] [-warmup N] [-optimizer sgd|adam|adamw|rmsprop] [-seed N] [-recompute P] [-memory-budget B] FILE.kir", "time training steps on random inputs: median step time, samples/s, memory traffic", runBench},
		{"train", "[MODEL.kir -data FILE.csv|FILE.npz|FILE.safetensors|digits|kan2d|reverse] [-eval-data FILE] [-eval-every N] [-save-best FILE] [-epochs N] [-steps N] [-optimizer sgd|adam|adamw|rmsprop] [-accum K] [-dist mpi|local:N [-dist-shard]] [-recompute P] [-memory-budget B] ...", "train a model (with no arguments: the built-in digits MLP; a model with no inputs needs no -data)", runTrain},
		{"compile", "MODEL.kir -o OUT.kplan [-device cpu|gpu] [-optimizer sgd|adam|adamw|rmsprop] [-lr LR] [-accum K] [-ranks N [-dist-shard]] [-O0] [-init P.safetensors] [-recompute P] [-memory-budget B]", "compile the training step into a plan file that kiln run trains from", runCompile},
		{"run", "FILE.kplan [-device cpu|gpu] [-data FILE.csv] [-epochs N] [-dist mpi|local:N] ...", "train from a plan file alone (with no -data: the digits data)", runRun},
		{"gradcheck", "[-inputs IN.safetensors] [-seed N] [-step H] [-rtol R] [-atol A] FILE.kir", "check every param's analytic gradient against central differences in float64", runGradcheck},
		{"export", "MODEL.kir -params P.safetensors -o MODEL.onnx [-with-loss]", "write a model's forward graph (its outputs after the loss) as an ONNX model for inference elsewhere", runExport},
		{"ops", "[-md]", "list every op: arguments, attributes with defaults, gradient", runOps},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one kiln command and returns the exit status: 0, 1 for
// failures, 2 for usage errors. A panic is a bug in kiln, never the user's
// mistake: it is reported on one line as an internal error with status 1,
// followed by the stack when KILN_DEBUG is set.
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			name := "kiln"
			if len(args) > 0 {
				name += " " + ir.Excerpt(args[0])
			}
			msg, _, _ := strings.Cut(fmt.Sprint(r), "\n")
			fmt.Fprintf(stderr, "%s: internal error (a bug in kiln; set KILN_DEBUG=check for the stack): %s\n", name, ir.Excerpt(msg))
			if os.Getenv("KILN_DEBUG") != "" {
				stderr.Write(debug.Stack())
			}
			code = 1
		}
	}()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(args[1:], stdout)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		}
		fmt.Fprintf(stderr, "kiln %s: %v\n", c.name, err)
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "usage: kiln %s %s\n", c.name, c.args)
			return 2
		}
		return 1
	}
	fmt.Fprintf(stderr, "kiln: unknown command %q\n", ir.Excerpt(args[0]))
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kiln compiles dataflow graphs into training plans and runs them.")
	fmt.Fprintln(w, "\nusage: kiln COMMAND [flags] [args]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-6s %s\n         %s\n", c.name, c.summary, "kiln "+c.name+" "+c.args)
	}
	fmt.Fprintln(w, "\nkiln COMMAND -h lists a command's flags. KILN_DEBUG=check,time,dump=PASS|all,nan turns on debug output.")
}

// parseFlags parses flags given before, between or after the positional
// arguments and returns the positional ones. -h lists the flags on stdout.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func oneFile(pos []string, what string) (string, error) {
	switch len(pos) {
	case 0:
		return "", usagef("missing %s", what)
	case 1:
		return pos[0], nil
	}
	return "", usagef("expected one %s, found %d arguments: %s", what, len(pos), strings.Join(pos, " "))
}
