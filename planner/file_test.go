package planner_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// examplePlans compiles every example model for training (Adam) and for
// evaluation.
func examplePlans(t *testing.T) map[string]*planner.File {
	t.Helper()
	srcs := map[string][]byte{examples.DigitsMLPFile: examples.DigitsMLP}
	lin, err := os.ReadFile("../examples/linreg/linreg.kir")
	if err != nil {
		t.Fatal(err)
	}
	srcs["linreg"] = lin
	srcs["mlp"] = []byte(mlpSrc)
	out := map[string]*planner.File{}
	adam, _ := passes.DefaultOptimizer("adam")
	for name, src := range srcs {
		g, err := ir.Parse(name, src)
		if err != nil {
			t.Fatal(err)
		}
		train, err := kiln.Compile(g, kiln.Options{Optimizer: &adam})
		if err != nil {
			t.Fatal(err)
		}
		eval, err := kiln.Compile(g, kiln.Options{Inference: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []*planner.Plan{train, eval} {
			if err := p.Check(); err != nil {
				t.Fatalf("%s: Check: %v", name, err)
			}
		}
		w := train.Buffers[train.Params[0]]
		params := []planner.Tensor{{Name: w.Name, Type: w.Type, Data: bytes.Repeat([]byte{1}, int(w.Size))}}
		out[name] = &planner.File{Plans: map[string]*planner.Plan{"train": train, "eval": eval}, Params: params, Meta: map[string]string{"optimizer": "adam"}}
	}
	return out
}

var planCmp = cmp.Options{
	cmpopts.IgnoreFields(ir.Value{}, "Pos"),
	cmpopts.IgnoreFields(ir.Graph{}, "File"),
	cmpopts.IgnoreUnexported(ir.Graph{}),
	cmpopts.EquateEmpty(),
	cmp.Comparer(func(a, b ir.AttrValue) bool { return a.Equal(b) }),
}

// TestFileRoundTrip writes and reads back the plans of every example model
// and compares them field by field; writing twice gives the same bytes.
func TestFileRoundTrip(t *testing.T) {
	for name, f := range examplePlans(t) {
		t.Run(name, func(t *testing.T) {
			var a, b bytes.Buffer
			if err := planner.Encode(&a, f); err != nil {
				t.Fatal(err)
			}
			if err := planner.Encode(&b, f); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Error("two encodings of one plan differ")
			}
			got, err := planner.Decode(bytes.NewReader(a.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(f, got, planCmp); d != "" {
				t.Errorf("round trip changed the file (-want +got):\n%s", d)
			}
		})
	}
}

func encoded(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := planner.Encode(&buf, examplePlans(t)["linreg"]); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFileRefusesBadFiles checks each way a file can be wrong.
func TestFileRefusesBadFiles(t *testing.T) {
	good := encoded(t)
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "too short for the 56-byte header"},
		{"not a plan", []byte(strings.Repeat("x", 100)), `does not start with "KILNPLAN"`},
		{"truncated", good[:len(good)-10], "truncated plan file"},
		{"trailing", append(append([]byte(nil), good...), 0), "data after the"},
		{"corrupted", mutate(func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }), "checksum mismatch"},
		{"newer", mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], planner.FileVersion+1); return b }), "is newer than this kiln reads"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planner.Decode(bytes.NewReader(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestSaveLoad writes a plan file atomically and reads it back; errors
// name the file.
func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.kplan")
	f := examplePlans(t)["mlp"]
	if err := planner.Save(path, f); err != nil {
		t.Fatal(err)
	}
	got, err := planner.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(f, got, planCmp); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("Save left %d files, want 1", len(entries))
	}
	os.WriteFile(path, []byte("KILNPLAN"), 0o644)
	if _, err := planner.Load(path); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("Load of a short file: %v, want an error starting with the path", err)
	}
}

// FuzzDecode checks that no plan file makes Decode panic, that what it
// accepts encodes and decodes back to the same plans, and that the CPU
// executor runs each accepted plan without panicking. The fuzzer mutates
// the JSON document (and the params' data and the version), and the
// harness recomputes the graph hashes and the checksum, so that mutations
// reach the decoder and Check instead of failing the checksum. The seeds
// are the documents of real plan files: training steps with in-place
// updates and with copies, evaluation graphs, and a forward graph.
func FuzzDecode(f *testing.F) {
	g, _ := ir.Parse("t", []byte("graph t\ninput %x: f32[2]\n%y = exp %x\noutput %y\n"))
	p, err := kiln.Compile(g, kiln.Options{})
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := planner.Encode(&buf, &planner.File{Plans: map[string]*planner.Plan{"p": p}}); err != nil {
		f.Fatal(err)
	}
	lin, err := os.ReadFile("../examples/linreg/linreg.kir")
	if err != nil {
		f.Fatal(err)
	}
	files := [][]byte{buf.Bytes(), []byte("KILNPLAN")}
	for _, noInPlace := range []bool{false, true} {
		files = append(files, trainEvalFile(f, string(lin), noInPlace))
	}
	for _, file := range files {
		version, doc, data, err := planner.Unpack(file)
		if err != nil {
			version, doc, data = planner.FileVersion, file, nil
		}
		f.Add(version, doc, data)
	}
	f.Fuzz(func(t *testing.T, version uint32, doc, data []byte) {
		file, err := planner.Decode(bytes.NewReader(planner.Pack(version, rehash(doc), data)))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("an error of more than one line: %q", err)
			}
			return
		}
		var out bytes.Buffer
		if err := planner.Encode(&out, file); err != nil {
			t.Fatalf("re-encoding an accepted file: %v", err)
		}
		again, err := planner.Decode(&out)
		if err != nil {
			t.Fatalf("decoding an accepted file re-encoded: %v", err)
		}
		if d := cmp.Diff(file, again, planCmp); d != "" {
			t.Fatalf("an accepted file re-encoded decodes differently (-first +second):\n%s", d)
		}
		for _, p := range file.Plans {
			if p.ArenaBytes > 1<<20 {
				continue // the fuzzer's business is the file, not large kernels
			}
			x, err := kiln.NewExecutor(p, kiln.ExecOptions{Workers: 1})
			if err != nil {
				continue // a kernel refused its types or attributes
			}
			x.Step(context.Background())
			x.Close()
		}
	})
}

// rehash returns doc with each plan's graph_sha256 set to the hash of its
// graph, when doc is a plan file's JSON document and the graph parses, so
// that a mutated graph reaches Check; otherwise doc unchanged.
func rehash(doc []byte) []byte {
	var payload planner.FilePayload
	if json.Unmarshal(doc, &payload) != nil {
		return doc
	}
	changed := false
	for name, pj := range payload.Plans {
		g, err := ir.Parse("plan graph", []byte(pj.Graph))
		if err != nil {
			continue
		}
		if h := (&planner.Plan{Graph: g}).GraphHash(); h != pj.GraphHash {
			pj.GraphHash, changed = h, true
			payload.Plans[name] = pj
		}
	}
	if !changed {
		return doc
	}
	out, err := json.Marshal(payload)
	if err != nil {
		return doc
	}
	return out
}

// repack rewrites an encoded plan file: f edits the JSON document, the
// version is set, and the lengths and checksum are recomputed.
func repack(t *testing.T, file []byte, version uint32, f func(doc []byte) []byte) []byte {
	t.Helper()
	_, doc, data, err := planner.Unpack(file)
	if err != nil {
		t.Fatal(err)
	}
	return planner.Pack(version, f(slices.Clone(doc)), data)
}

// TestFileAliases: in-place buffers survive the round trip (TestFileRoundTrip
// compares them); a version 1 file, written before aliases existed, loads;
// one that carries an alias, a bad alias or an unknown field does not.
func TestFileAliases(t *testing.T) {
	g, err := ir.Parse("mlp", []byte(mlpSrc))
	if err != nil {
		t.Fatal(err)
	}
	noAlias, err := kiln.Compile(g, kiln.Options{Grad: true, O0: true, Plan: planner.Options{NoInPlace: true}})
	if err != nil {
		t.Fatal(err)
	}
	withAlias, err := kiln.Compile(g, kiln.Options{Grad: true, O0: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*planner.Plan{noAlias, withAlias} {
		if err := p.Check(); err != nil {
			t.Fatal(err)
		}
	}
	enc := func(p *planner.Plan) []byte {
		var buf bytes.Buffer
		if err := planner.Encode(&buf, &planner.File{Plans: map[string]*planner.Plan{"p": p}}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	if !bytes.Contains(enc(withAlias), []byte(`"alias":`)) {
		t.Fatal("the encoded plan has no alias")
	}
	keep := func(doc []byte) []byte { return doc }
	v1, err := planner.Decode(bytes.NewReader(repack(t, enc(noAlias), 1, keep)))
	if err != nil {
		t.Fatalf("a version 1 file: %v", err)
	}
	if d := cmp.Diff(noAlias, v1.Plans["p"], planCmp); d != "" {
		t.Errorf("version 1 file (-want +got):\n%s", d)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"alias in version 1", repack(t, enc(withAlias), 1, keep), "an alias in a version 1 file"},
		{"unknown field", repack(t, enc(noAlias), planner.FileVersion, func(doc []byte) []byte {
			return bytes.Replace(doc, []byte(`"start":`), []byte(`"first":0,"start":`), 1)
		}), `unknown field "first"`},
		{"alias out of range", repack(t, enc(withAlias), planner.FileVersion, func(doc []byte) []byte {
			return bytes.Replace(doc, []byte(`"alias":`), []byte(`"alias":999`), 1)
		}), "is not a buffer index"},
		{"negative alias", repack(t, enc(noAlias), planner.FileVersion, func(doc []byte) []byte {
			return bytes.Replace(doc, []byte(`"start":`), []byte(`"alias":-1,"start":`), 1)
		}), "is not a buffer index"},
		{"alias not in place", repack(t, enc(noAlias), planner.FileVersion, func(doc []byte) []byte {
			// The first temp (%h, after five leaves) claims the input %x.
			i := bytes.Index(doc, []byte(`"role":"temp"`))
			return append(doc[:i:i], append([]byte(`"alias":0,`), doc[i:]...)...)
		}), "only a computed buffer can take the memory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planner.Decode(bytes.NewReader(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
