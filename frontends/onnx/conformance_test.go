package onnx

import (
	"context"
	"errors"
	"fmt"
	"github.com/kilnml/kiln/internal/golden"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"google.golang.org/protobuf/proto"
)

// onnxTestData is where Debian's libonnx-testdata puts ONNX's backend
// test data: a folder per suite, a folder per test holding model.onnx and
// test_data_set_N/{input,output}_K.pb.
const onnxTestData = "/usr/share/libonnx-testdata/data"

// conformanceSuites are the suites of the backend test data that hold
// models ("real" lists models to download).
var conformanceSuites = []string{"node", "pytorch-converted", "pytorch-operator", "simple"}

// conformanceFloors are the least numbers of passing tests per suite: a
// change that passes fewer fails TestONNXConformance.
var conformanceFloors = map[string]int{"node": 747, "pytorch-converted": 79, "pytorch-operator": 35, "simple": 7}

const (
	conformanceDoc = "../../docs/ONNX-CONFORMANCE.md"
	// ONNX's backend tests compare with numpy's assert_allclose at these.
	conformanceRtol = 1e-3
	conformanceAtol = 1e-7
)

// outcome is the result of one backend test.
type outcome int

const (
	casePassed      outcome = iota
	caseFailed              // kiln ran the model and computed other values, or failed at run time
	caseUnsupported         // kiln refused the model or its data
	caseCrashed             // kiln panicked: a bug
)

type conformanceResult struct {
	suite, test string
	outcome     outcome
	reason      string
}

// TestONNXConformance runs ONNX's backend test data (Debian's
// libonnx-testdata) through kiln.Eval, the function kiln eval runs: every
// model is imported, evaluated on the CPU on each of its data sets and
// compared with the expected outputs at ONNX's tolerance (rtol 1e-3, atol
// 1e-7, NaN equal to NaN). A panic fails the test; a refused model is
// "unsupported". The counts per suite must not drop below
// conformanceFloors, and docs/ONNX-CONFORMANCE.md must list them and
// every test that does not pass with its reason (-update rewrites it).
func TestONNXConformance(t *testing.T) {
	if _, err := os.Stat(onnxTestData); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("ONNX's backend test data is missing (%v); install Debian's libonnx-testdata", err)
		}
		t.Skipf("skipped: ONNX's backend test data is not installed (%v); apt-get install libonnx-testdata", err)
	}
	type job struct{ suite, test string }
	var jobs []job
	for _, s := range conformanceSuites {
		ents, err := os.ReadDir(filepath.Join(onnxTestData, s))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() {
				jobs = append(jobs, job{s, e.Name()})
			}
		}
	}
	results := make([]conformanceResult, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				j := jobs[k]
				results[k] = runConformance(j.suite, j.test)
			}
		}()
	}
	for k := range jobs {
		next <- k
	}
	close(next)
	wg.Wait()

	for _, r := range results {
		if r.outcome == caseCrashed {
			t.Errorf("%s/%s: %s", r.suite, r.test, r.reason)
		}
	}
	counts := map[string][4]int{}
	for _, r := range results {
		c := counts[r.suite]
		c[r.outcome]++
		counts[r.suite] = c
	}
	for _, s := range conformanceSuites {
		if n := counts[s][casePassed]; n < conformanceFloors[s] {
			t.Errorf("suite %s: %d tests pass, fewer than the %d that passed before", s, n, conformanceFloors[s])
		}
	}
	golden.Check(t, conformanceDoc, []byte(conformanceReport(results, counts)))
}

// runConformance runs one backend test; a panic is a crashed result.
func runConformance(suite, test string) (res conformanceResult) {
	res = conformanceResult{suite: suite, test: test}
	defer func() {
		if r := recover(); r != nil {
			msg, _, _ := strings.Cut(fmt.Sprint(r), "\n")
			res.outcome, res.reason = caseCrashed, "panic: "+ir.Excerpt(msg)
		}
	}()
	dir := filepath.Join(onnxTestData, suite, test)
	sets, err := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if err != nil || len(sets) == 0 {
		res.outcome, res.reason = caseUnsupported, "no data sets"
		return res
	}
	sort.Strings(sets)
	for _, set := range sets {
		res.outcome, res.reason = conformanceCase(dir, set)
		if res.outcome != casePassed {
			return res
		}
	}
	return res
}

// conformanceCase imports dir/model.onnx, with the shapes of the inputs
// of the data set folder set, evaluates it and compares the outputs.
func conformanceCase(dir, set string) (outcome, string) {
	data, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		return caseUnsupported, err.Error()
	}
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(data, &mp); err != nil {
		return caseUnsupported, "not an ONNX model: " + err.Error()
	}
	ins, err := readPBs(set, "input")
	if err != nil {
		return caseUnsupported, err.Error()
	}
	wants, err := readPBs(set, "output")
	if err != nil {
		return caseUnsupported, err.Error()
	}
	// The data set feeds the graph inputs that are not initializers, in
	// order; their shapes are the data's.
	inits := map[string]bool{}
	for _, t := range mp.GetGraph().GetInitializer() {
		inits[t.GetName()] = true
	}
	var names []string
	for _, in := range mp.GetGraph().GetInput() {
		if !inits[in.GetName()] {
			names = append(names, in.GetName())
		}
	}
	if len(names) != len(ins) {
		return caseUnsupported, fmt.Sprintf("the data set has %d inputs, the graph %d", len(ins), len(names))
	}
	opts := Options{Shapes: map[string][]int{}, Constants: map[string]safetensors.Tensor{}}
	byName := map[string]safetensors.Tensor{}
	for k, n := range names {
		opts.Shapes[n] = ins[k].Type.Shape
		byName[n] = ins[k]
	}
	// An input that the model uses as shape arithmetic (a Reshape's shape,
	// the axes of a reduction) must be known at import: it is given as a
	// constant, and the import tried again.
	var m *Model
	for {
		m, err = opts.Decode(data, dir)
		if err == nil {
			break
		}
		sub := mustBeConstant.FindStringSubmatch(err.Error())
		if sub == nil {
			return caseUnsupported, err.Error()
		}
		t, ok := byName[sub[1]]
		if _, done := opts.Constants[sub[1]]; !ok || done {
			return caseUnsupported, err.Error()
		}
		opts.Constants[sub[1]] = t
		delete(opts.Shapes, sub[1])
	}
	g := m.Graph
	if len(g.Outputs) != len(wants) {
		return caseUnsupported, fmt.Sprintf("the data set has %d outputs, the graph %d", len(wants), len(g.Outputs))
	}
	feeds := slices.Clone(m.Params)
	var fed []string
	for _, n := range names {
		if _, ok := opts.Constants[n]; !ok {
			fed = append(fed, n)
		}
	}
	for k, id := range g.Inputs() {
		t := byName[fed[k]]
		t.Name = g.Value(id).Name
		feeds = append(feeds, t)
	}
	outs, err := kiln.Eval(context.Background(), g, feeds, kiln.Options{Workers: 1})
	if err != nil {
		return caseFailed, err.Error()
	}
	for k, want := range wants {
		if err := allClose(outs[k], want); err != nil {
			return caseFailed, fmt.Sprintf("output %d: %v", k, err)
		}
	}
	// The passing model written as .kir reads back as the same graph.
	text := g.Format()
	back, err := ir.Parse("model.kir", []byte(text))
	if err != nil {
		return caseFailed, "the .kir text does not parse: " + err.Error()
	}
	if back.Format() != text {
		return caseFailed, "the .kir text does not read back unchanged"
	}
	return casePassed, ""
}

// readPBs reads the TensorProto files set/KIND_0.pb, KIND_1.pb, ...
func readPBs(set, kind string) ([]safetensors.Tensor, error) {
	var out []safetensors.Tensor
	im := &importer{}
	for k := 0; ; k++ {
		data, err := os.ReadFile(filepath.Join(set, kind+"_"+strconv.Itoa(k)+".pb"))
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var tp onnxpb.TensorProto
		if err := proto.Unmarshal(data, &tp); err != nil {
			return nil, fmt.Errorf("%s %d is not a TensorProto: %v", kind, k, err)
		}
		c, err := im.readTensor(&tp, false)
		if err != nil {
			return nil, fmt.Errorf("%s %d: %v", kind, k, err)
		}
		out = append(out, safetensors.Tensor{Name: tp.GetName(), Type: ir.Type{DType: c.dt, Shape: c.shape}, Data: c.bytes()})
	}
}

// allClose compares got with want as numpy's assert_allclose does at
// ONNX's tolerance: the same dtype and shape, |got - want| <= atol +
// rtol*|want|, NaN equal to NaN and infinities exactly.
func allClose(got, want safetensors.Tensor) error {
	if !got.Type.Equal(want.Type) {
		return fmt.Errorf("%s, expected %s", got.Type, want.Type)
	}
	g, w := got.Float64s(), want.Float64s()
	for k := range w {
		a, b := g[k], w[k]
		switch {
		case math.IsNaN(a) || math.IsNaN(b):
			if math.IsNaN(a) != math.IsNaN(b) {
				return fmt.Errorf("element %d is %g, expected %g", k, a, b)
			}
		case math.IsInf(a, 0) || math.IsInf(b, 0):
			if a != b {
				return fmt.Errorf("element %d is %g, expected %g", k, a, b)
			}
		case math.Abs(a-b) > conformanceAtol+conformanceRtol*math.Abs(b):
			return fmt.Errorf("element %d is %.7g, expected %.7g", k, a, b)
		}
	}
	return nil
}

var (
	mustBeConstant = regexp.MustCompile(`input \d+ \("([^"]*)"\) must be a constant known at import`)
	nodePrefix     = regexp.MustCompile(`node "[^"]*" \(`)
	graphPrefix    = regexp.MustCompile(`^graph [^ ]*: `)
	unsupportedR   = regexp.MustCompile(`^unsupported op ([^:]+):`)
)

// reasonKey is a reason without what names one test's values, so that the
// tests that fail for one reason are listed together.
func reasonKey(r string) string {
	r, _, _ = strings.Cut(r, "\n")
	if m := unsupportedR.FindStringSubmatch(r); m != nil {
		return "unsupported op " + m[1]
	}
	r = graphPrefix.ReplaceAllString(r, "")
	r = nodePrefix.ReplaceAllString(r, "(")
	return ir.Excerpt(r)
}

// conformanceReport is the text of docs/ONNX-CONFORMANCE.md.
func conformanceReport(results []conformanceResult, counts map[string][4]int) string {
	var b strings.Builder
	b.WriteString(`# ONNX backend tests

Generated by ` + "`go test ./frontends/onnx -run TestONNXConformance -update`" + `;
the test checks that this file is current. ONNX's backend test data (Debian's
` + "`libonnx-testdata`" + `, ONNX 1.12) runs through ` + "`kiln.Eval`" + `, the function
` + "`kiln eval`" + ` runs: every model is imported, evaluated on the CPU on each of
its data sets and compared with the expected outputs at ONNX's tolerance
(rtol 1e-3, atol 1e-7). *Unsupported*: kiln refused the model (an op,
attribute, dtype or opset it lacks), one line saying why. *Failed*: kiln
ran it and got other values, or refused at compile or run time.

| suite | tests | pass | failed | unsupported |
|---|---|---|---|---|
`)
	for _, s := range conformanceSuites {
		c := counts[s]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", s, c[0]+c[1]+c[2]+c[3], c[casePassed], c[caseFailed], c[caseUnsupported])
	}
	for _, s := range conformanceSuites {
		for _, oc := range []outcome{caseFailed, caseUnsupported} {
			groups := map[string][]string{}
			for _, r := range results {
				if r.suite == s && r.outcome == oc {
					k := reasonKey(r.reason)
					groups[k] = append(groups[k], r.test)
				}
			}
			if len(groups) == 0 {
				continue
			}
			word := "failed"
			if oc == caseUnsupported {
				word = "unsupported"
			}
			fmt.Fprintf(&b, "\n## %s: %s\n\n", s, word)
			keys := make([]string, 0, len(groups))
			for k := range groups {
				keys = append(keys, k)
			}
			sort.Slice(keys, func(i, j int) bool {
				if len(groups[keys[i]]) != len(groups[keys[j]]) {
					return len(groups[keys[i]]) > len(groups[keys[j]])
				}
				return keys[i] < keys[j]
			})
			for _, k := range keys {
				fmt.Fprintf(&b, "- %s (%d): %s\n", strings.ReplaceAll(k, "|", "\\|"), len(groups[k]), strings.Join(groups[k], ", "))
			}
		}
	}
	return b.String()
}
