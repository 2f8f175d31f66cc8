package planner_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// editFile decodes the JSON document of an encoded plan file, lets edit
// change it, and encodes it again with lengths and a checksum that match:
// the edited file passes the checksum and reaches the decoder. A plan whose
// graph text edit changed gets the graph hash of its new text.
func editFile(t *testing.T, file []byte, edit func(doc *planner.FilePayload)) []byte {
	t.Helper()
	version, doc, data, err := planner.Unpack(file)
	if err != nil {
		t.Fatal(err)
	}
	var payload planner.FilePayload
	if err := json.Unmarshal(doc, &payload); err != nil {
		t.Fatal(err)
	}
	graphs := map[string]string{}
	for name, pj := range payload.Plans {
		graphs[name] = pj.Graph
		// Deep copies, so that edits of one plan's slices stay in it.
		pj.Buffers, pj.Steps = slices.Clone(pj.Buffers), slices.Clone(pj.Steps)
		pj.Outputs, pj.Grads = slices.Clone(pj.Outputs), slices.Clone(pj.Grads)
		payload.Plans[name] = pj
	}
	edit(&payload)
	for name, pj := range payload.Plans {
		if pj.Graph != graphs[name] {
			sum := sha256.Sum256([]byte(pj.Graph))
			pj.GraphHash = hex.EncodeToString(sum[:])
			payload.Plans[name] = pj
		}
	}
	doc, err = json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return planner.Pack(version, doc, data)
}

// editPlan returns an edit of the plan called name.
func editPlan(name string, edit func(p *planner.PlanJSON)) func(*planner.FilePayload) {
	return func(doc *planner.FilePayload) {
		p := doc.Plans[name]
		edit(&p)
		doc.Plans[name] = p
	}
}

// buffer returns the index of the buffer called name.
func buffer(t *testing.T, p *planner.PlanJSON, name string) int {
	for i, b := range p.Buffers {
		if b.Name == name {
			return i
		}
	}
	t.Fatalf("no buffer %%%s", name)
	return -1
}

// trainEvalFile encodes what kiln compile writes for the graph src: the
// training step (Adam) under "train", the evaluation graph under "eval",
// and the initial value of the first param. With noInPlace, no value takes
// another's memory, so every update is applied by a copy step.
func trainEvalFile(t testing.TB, src string, noInPlace bool) []byte {
	t.Helper()
	g, err := ir.Parse("model", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	adam, _ := passes.DefaultOptimizer("adam")
	opts := planner.Options{NoInPlace: noInPlace}
	train, err := kiln.Compile(g, kiln.Options{Optimizer: &adam, Plan: opts})
	if err != nil {
		t.Fatal(err)
	}
	eval, err := kiln.Compile(g, kiln.Options{Inference: true, Plan: opts})
	if err != nil {
		t.Fatal(err)
	}
	w := train.Buffers[train.Params[0]]
	f := &planner.File{
		Plans:  map[string]*planner.Plan{planner.TrainPlan: train, planner.EvalPlan: eval},
		Params: []planner.Tensor{{Name: w.Name, Type: w.Type, Data: make([]byte, w.Size)}},
	}
	var buf bytes.Buffer
	if err := planner.Encode(&buf, f); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestLoadRefusesLyingPlans: a plan file whose checksum is right but whose
// plans do not do what their graphs say, or are not what their names in
// the file say, is refused by Load with one line that names the file, the
// plan and what was expected and found. Each case edits the JSON of a
// good file and recomputes the checksum.
func TestLoadRefusesLyingPlans(t *testing.T) {
	good := trainEvalFile(t, mlpSrc, false)
	copies := trainEvalFile(t, mlpSrc, true)
	const train, eval = planner.TrainPlan, planner.EvalPlan
	tests := []struct {
		name string
		file []byte // good when nil
		edit func(t *testing.T, doc *planner.FilePayload)
		want string
	}{
		{name: "no outputs in train", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(train, func(p *planner.PlanJSON) { p.Outputs = []planner.Named{} })(doc)
		}, want: `plan "train": 0 outputs, the graph has 1 (%loss)`},
		{name: "no outputs in eval", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.Outputs = nil })(doc)
		}, want: `plan "eval": 0 outputs, the graph has 1 (%loss)`},
		{name: "loss is an input", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(train, func(p *planner.PlanJSON) { p.Outputs[0].Buffer = buffer(t, p, "x") })(doc)
		}, want: `plan "train": output 0 (loss) is buffer 0 (%x), the graph's output 0 is %loss (buffer`},
		{name: "output renamed", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.Outputs[0].Name = "accuracy" })(doc)
		}, want: `plan "eval": output 0 (accuracy) is buffer`},
		{name: "extra output", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.Outputs = append(p.Outputs, planner.Named{Name: "x", Buffer: 0}) })(doc)
		}, want: `plan "eval": 2 outputs, the graph has 1`},
		{name: "grads in a training step", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(train, func(p *planner.PlanJSON) {
				p.Grads = []planner.Named{{Name: "grad/w1", Buffer: buffer(t, p, "x")}}
			})(doc)
		}, want: `plan "train": 1 gradients, the graph has 0`},
		{name: "huge unaligned offset", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(train, func(p *planner.PlanJSON) { p.Buffers[buffer(t, p, "w1")].Offset = 1<<63 - 8 })(doc)
		}, want: `plan "train": buffer %w1: offset 9223372036854775800 is not a multiple of 256`},
		{name: "huge aligned offset", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(train, func(p *planner.PlanJSON) { p.Buffers[buffer(t, p, "w1")].Offset = 1<<63 - 256 })(doc)
		}, want: `plan "train": buffer %w1: 1280 bytes at offset 9223372036854775552 lie outside the arena of`},
		{name: "negative offset", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.Buffers[buffer(t, p, "w1")].Offset = -256 })(doc)
		}, want: `plan "eval": buffer %w1: 1280 bytes at offset -256 lie outside the arena of`},
		{name: "misaligned offset", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.Buffers[buffer(t, p, "w1")].Offset += 8 })(doc)
		}, want: "is not a multiple of 256"},
		{name: "overlapping buffers", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) {
				p.Buffers[buffer(t, p, "b1")].Offset = p.Buffers[buffer(t, p, "w1")].Offset
			})(doc)
		}, want: "overlap while both are live"},
		{name: "buffer larger than its type", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.Buffers[buffer(t, p, "b1")].Size = 1 << 20 })(doc)
		}, want: "buffer %b1: size 1048576, f32[16] needs 64"},
		{name: "arena far larger than its buffers", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.ArenaBytes = 1 << 50 })(doc)
		}, want: `plan "eval": arena of 1125899906842624 bytes, but its buffers end at`},
		{name: "negative arena", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.ArenaBytes = -1 })(doc)
		}, want: "arena of -1 bytes"},
		{name: "step of another op", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.Steps[0].Kernel = "exp/f32" })(doc)
		}, want: `runs kernel "exp/f32"`},
		{name: "step with other arguments", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { slices.Reverse(p.Steps[0].Args) })(doc)
		}, want: "argument 0 is buffer"},
		{name: "loss never computed", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.Steps = p.Steps[:len(p.Steps)-1] })(doc)
		}, want: `plan "eval": no step computes %loss`},
		{name: "no steps", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) { p.Steps = []planner.StepJSON{} })(doc)
		}, want: "no step computes"},
		{name: "value computed twice", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) {
				p.Steps = append(p.Steps, p.Steps[len(p.Steps)-1])
				p.Steps[len(p.Steps)-1].Args = slices.Clone(p.Steps[len(p.Steps)-1].Args)
			})(doc)
		}, want: "is computed by both step"},
		{name: "kernel writes a param", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) {
				p.Steps = append(p.Steps, planner.StepJSON{Kind: "kernel", Kernel: "param/f32", Args: []int{}, Out: buffer(t, p, "w1")})
			})(doc)
		}, want: `plan "eval": step 3 runs param into %w1, a param; only the copy of an update writes a param or state`},
		{name: "copy into a param in eval", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(eval, func(p *planner.PlanJSON) {
				w := buffer(t, p, "w1")
				p.Steps = append(p.Steps, planner.StepJSON{Kind: "copy", Args: []int{w}, Out: w})
			})(doc)
		}, want: `plan "eval": step 3 copies %w1 into %w1, which the graph does not update`},
		{name: "update never applied", file: copies, edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(train, func(p *planner.PlanJSON) {
				i := slices.IndexFunc(p.Steps, func(s planner.StepJSON) bool { return s.Kind == "copy" })
				p.Steps = slices.Delete(p.Steps, i, i+1)
			})(doc)
		}, want: "no step applies the update of"},
		{name: "update applied twice", file: copies, edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(train, func(p *planner.PlanJSON) {
				i := slices.IndexFunc(p.Steps, func(s planner.StepJSON) bool { return s.Kind == "copy" })
				p.Steps = append(p.Steps, p.Steps[i])
			})(doc)
		}, want: "both apply the update of"},
		{name: "update applied before the last read", file: copies, edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(train, func(p *planner.PlanJSON) {
				// Move the last copy (an update of a param, which the
				// forward pass reads) to the first step.
				i := slices.IndexFunc(p.Steps, func(s planner.StepJSON) bool {
					return s.Kind == "copy" && p.Buffers[s.Out].Role == "param"
				})
				s := p.Steps[i]
				p.Steps = slices.Insert(slices.Delete(p.Steps, i, i+1), 0, s)
				for k := range p.Buffers {
					p.Buffers[k].Start, p.Buffers[k].End = 0, len(p.Steps)-1
				}
			})(doc)
		}, want: "after step 0 copied its update into it"},
		{name: "train plan in the eval slot", edit: func(t *testing.T, doc *planner.FilePayload) {
			doc.Plans[eval] = doc.Plans[train]
		}, want: `plan "eval": not an evaluation graph: it updates 11 params and state (%adam.beta1_power.f32, %adam.beta2_power.f32, %w1.adam_m and 8 more); evaluation must change none`},
		{name: "eval plan in the train slot", edit: func(t *testing.T, doc *planner.FilePayload) {
			doc.Plans[train] = doc.Plans[eval]
		}, want: `plan "train": not a training step: it updates none of its 3 params (%w1, %b1, %w2)`},
		{name: "training step without updates", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(train, func(p *planner.PlanJSON) {
				var keep []string
				for _, l := range strings.Split(p.Graph, "\n") {
					if !strings.HasPrefix(l, "update ") {
						keep = append(keep, l)
					}
				}
				p.Graph = strings.Join(keep, "\n")
			})(doc)
		}, want: `plan "train": buffer %u30 (temp) takes %adam.beta1_power.f32 (state) in place, but only a computed buffer can take the memory of another`},
		{name: "graph that fails its check", edit: func(t *testing.T, doc *planner.FilePayload) {
			editPlan(train, func(p *planner.PlanJSON) {
				i := strings.Index(p.Graph, "update %w1 =")
				line := p.Graph[i : i+strings.Index(p.Graph[i:], "\n")+1]
				p.Graph = p.Graph[:i] + line + p.Graph[i:]
			})(doc)
		}, want: "%w1 is updated twice"},
		{name: "initial value of a non-param", edit: func(t *testing.T, doc *planner.FilePayload) {
			doc.Params[0].Name = "x"
		}, want: `param "x": f32[20,16], plan "eval" has %x: f32[32,20] (input)`},
		{name: "initial value of nothing", edit: func(t *testing.T, doc *planner.FilePayload) {
			doc.Params[0].Name = "w9"
		}, want: `param "w9": no plan in the file has a param of that name`},
		{name: "initial value beyond the data", edit: func(t *testing.T, doc *planner.FilePayload) {
			doc.Params[0].Offset = 1<<63 - 1
		}, want: `param "w1": 1280 bytes at 9223372036854775807 do not fit f32[20,16] in 1280 bytes of data`},
		{name: "initial value of another type", edit: func(t *testing.T, doc *planner.FilePayload) {
			doc.Params[0].Type = "f32[16,20]"
		}, want: `param "w1": f32[16,20], plan "eval" has %w1: f32[20,16] (param)`},
		{name: "two initial values of one param", edit: func(t *testing.T, doc *planner.FilePayload) {
			doc.Params = append(doc.Params, doc.Params[0])
		}, want: `param "w1": given twice`},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if file == nil {
				file = good
			}
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".kplan")
			if err := os.WriteFile(path, editFile(t, file, func(doc *planner.FilePayload) { tc.edit(t, doc) }), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := planner.Load(path)
			if err == nil {
				t.Fatalf("Load accepted the file; want an error containing %q", tc.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("Load = %q\nwant one line starting with the path and containing %q", msg, tc.want)
			}
		})
	}
	// The helper itself changes nothing: an unedited file loads.
	for _, file := range [][]byte{good, copies} {
		if _, err := planner.Decode(bytes.NewReader(editFile(t, file, func(*planner.FilePayload) {}))); err != nil {
			t.Errorf("an unedited file: %v", err)
		}
	}
}

// runPlans runs each plan of file once on the CPU, from zero inputs and
// the params of seed 1 (and the file's initial values), and returns every
// name the executor reads (inputs, params, state, outputs) after the step,
// as "plan/name" → bytes.
func runPlans(t testing.TB, file *planner.File) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, p := range file.Plans {
		x, err := kiln.NewExecutor(p, kiln.ExecOptions{Seed: 1, Workers: 1})
		if err != nil {
			t.Fatalf("plan %q: %v", name, err)
		}
		for _, v := range file.Params {
			if err := x.Set(v.Name, kernels.Tensor{Type: v.Type, Data: v.Data}); err != nil {
				t.Fatalf("plan %q: %v", name, err)
			}
		}
		if err := x.Step(context.Background()); err != nil {
			t.Fatalf("plan %q: %v", name, err)
		}
		for _, n := range x.Names() {
			v, err := x.Get(n)
			if err != nil {
				t.Fatal(err)
			}
			out[name+"/"+n] = slices.Clone(v.Data)
		}
		x.Close()
	}
	return out
}

// editPlanFields changes one field of one plan of doc, chosen by field and
// index, to value: a buffer's offset, size, live range, alias or role, a
// step's output, argument or kind, the order or number of the steps, an
// output, a gradient, the arena, the lower bound or the chunk size.
func editPlanFields(doc *planner.FilePayload, field uint8, index uint16, value int64) {
	names := []string{planner.EvalPlan, planner.TrainPlan}
	name := names[int(field)%len(names)]
	p := doc.Plans[name]
	defer func() { doc.Plans[name] = p }()
	i := int(index)
	pick := func(n int) int { return i % max(n, 1) }
	b := func() *planner.BufferJSON { return &p.Buffers[pick(len(p.Buffers))] }
	s := func() *planner.StepJSON { return &p.Steps[pick(len(p.Steps))] }
	switch field / 2 % 18 {
	case 0:
		b().Offset = value
	case 1:
		b().Offset += value * planner.Align
	case 2:
		b().Size = value
	case 3:
		b().Start = int(value)
	case 4:
		b().End = int(value)
	case 5:
		if value < 0 {
			b().Alias = nil
		} else {
			a := int(value)
			b().Alias = &a
		}
	case 6:
		b().Role = []string{"temp", "input", "param", "state"}[uint64(value)%4]
	case 7:
		s().Out = int(value)
	case 8:
		if st := s(); len(st.Args) > 0 {
			st.Args = slices.Clone(st.Args)
			st.Args[int(uint64(value)%uint64(len(st.Args)))] = int(value >> 8)
		}
	case 9:
		st := s()
		if st.Kind == "copy" {
			st.Kind, st.Kernel = "kernel", p.Buffers[pick(len(p.Buffers))].Type
		} else {
			st.Kind, st.Kernel = "copy", ""
		}
	case 10:
		if len(p.Steps) > 0 {
			k := pick(len(p.Steps))
			p.Steps = slices.Delete(slices.Clone(p.Steps), k, k+1)
		}
	case 11:
		if len(p.Steps) > 0 {
			p.Steps = slices.Insert(slices.Clone(p.Steps), int(uint64(value)%uint64(len(p.Steps))), *s())
		}
	case 12:
		if len(p.Steps) > 0 {
			j, k := pick(len(p.Steps)), int(uint64(value)%uint64(len(p.Steps)))
			p.Steps[j], p.Steps[k] = p.Steps[k], p.Steps[j]
		}
	case 13:
		if len(p.Outputs) > 0 {
			p.Outputs[pick(len(p.Outputs))].Buffer = int(value)
		}
	case 14:
		p.Grads = append(p.Grads, planner.Named{Name: "grad/" + b().Name, Buffer: int(value)})
	case 15:
		p.ArenaBytes = value
	case 16:
		p.LowerBound = value
	case 17:
		p.ChunkBytes = value
	}
}

// planEdits holds good plan files and what their plans compute, for
// checkEdit.
type planEdits struct {
	files [][]byte
	want  []map[string][]byte
}

func newPlanEdits(t testing.TB) *planEdits {
	e := &planEdits{files: [][]byte{trainEvalFile(t, mlpSrc, false), trainEvalFile(t, mlpSrc, true)}}
	for _, file := range e.files {
		dec, err := planner.Decode(bytes.NewReader(file))
		if err != nil {
			t.Fatal(err)
		}
		e.want = append(e.want, runPlans(t, dec))
	}
	return e
}

// check changes one field of a good plan file (see editPlanFields) and
// recomputes its checksum: Decode must refuse the file with one line or,
// if it accepts it, its plans must compute bitwise what the unedited plans
// compute. An edit that Decode accepts and that changes the results is a
// plan that lies. check reports whether Decode accepted the file.
func (e *planEdits) check(t *testing.T, which, field uint8, index uint16, value int64) bool {
	t.Helper()
	k := int(which) % len(e.files)
	edited := editFile(t, e.files[k], func(doc *planner.FilePayload) { editPlanFields(doc, field, index, value) })
	file, err := planner.Decode(bytes.NewReader(edited))
	if err != nil {
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("an error of more than one line: %q", err)
		}
		return false
	}
	got := runPlans(t, file)
	for name, w := range e.want[k] {
		if !bytes.Equal(got[name], w) {
			t.Fatalf("file %d, edit %d of index %d to %d: accepted, but %s differs from the unedited plan's", k, field, index, value, name)
		}
	}
	return true
}

// TestPlanEdits makes every kind of edit of editPlanFields, to a few
// indices and values, in both plans of both files (check).
func TestPlanEdits(t *testing.T) {
	e := newPlanEdits(t)
	accepted, total := 0, 0
	for which := range uint8(2) {
		for field := range uint8(36) {
			for _, index := range []uint16{0, 3, 29} {
				for _, value := range []int64{-1, 0, 1, 8, planner.Align, 1 << 20, 1 << 62, -1 << 63} {
					total++
					if e.check(t, which, field, index, value) {
						accepted++
					}
				}
			}
		}
	}
	t.Logf("%d of %d edits accepted, each computing what the unedited plan does", accepted, total)
}

// FuzzPlanEdits is TestPlanEdits with the edits the fuzzer chooses.
func FuzzPlanEdits(f *testing.F) {
	e := newPlanEdits(f)
	for field := range uint8(36) {
		f.Add(field%2, field, uint16(field*7), int64(planner.Align))
	}
	f.Fuzz(func(t *testing.T, which, field uint8, index uint16, value int64) {
		e.check(t, which, field, index, value)
	})
}
