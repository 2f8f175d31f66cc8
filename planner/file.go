package planner

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"

	"github.com/kilnml/kiln/internal/atomicfile"

	"github.com/kilnml/kiln/ir"
)

// FileVersion is the newest version of the plan file format this package
// reads and writes. Load refuses files of a newer version. Version 2 added
// a buffer's "alias" (Buffer.Alias, in-place reuse); version 3 a plan's
// "chunk_bytes" (Plan.ChunkBytes, the arena split for a GPU). Encode
// writes the oldest version that holds the file: 3 only when a plan has
// chunks, so files without them still load in a kiln that reads version 2.
// Version 4 added frozen params (a graph's param with frozen=true,
// ir.Graph.Frozen), written only when a plan has one.
const FileVersion = 4

// fileMagic starts every plan file.
var fileMagic = [8]byte{'K', 'I', 'L', 'N', 'P', 'L', 'A', 'N'}

// headerSize is the fixed part before the payload: magic, version, flags,
// payload length and the payload's SHA-256.
const headerSize = 8 + 4 + 4 + 8 + sha256.Size

// File is what a plan file holds: one or more named plans (kiln compile
// writes "train", the training step, and "eval", the forward graph for
// evaluation), optional initial values for params, and free-form metadata.
type File struct {
	Plans  map[string]*Plan
	Params []Tensor          // optional initial values of params, by name
	Meta   map[string]string // e.g. the optimizer, the source file, the seed
}

// The names of the plans that kiln compile writes and kiln run reads.
// Decode checks that a plan under TrainPlan is a training step
// (Plan.CheckTraining) and one under EvalPlan an evaluation graph
// (Plan.CheckEvaluation).
const (
	TrainPlan = "train"
	EvalPlan  = "eval"
)

// Tensor is a named tensor's type and raw little-endian bytes.
type Tensor struct {
	Name string
	Type ir.Type
	Data []byte
}

// The JSON payload. Everything a plan is made of is written explicitly; the
// graph travels as its canonical .kir text, which Load parses and checks.
type filePayload struct {
	Plans  map[string]planJSON `json:"plans"`
	Params []tensorJSON        `json:"params,omitempty"`
	Meta   map[string]string   `json:"meta,omitempty"`
}

type planJSON struct {
	Graph      string       `json:"graph"`
	GraphHash  string       `json:"graph_sha256"`
	ArenaBytes int64        `json:"arena_bytes"`
	LowerBound int64        `json:"lower_bound"`
	ChunkBytes int64        `json:"chunk_bytes,omitempty"` // version 3
	Buffers    []bufferJSON `json:"buffers"`
	Steps      []stepJSON   `json:"steps"`
	Outputs    []Named      `json:"outputs"`
	Grads      []Named      `json:"grads"`
}

type bufferJSON struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Role   string `json:"role"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	Start  int    `json:"start"`
	End    int    `json:"end"`
	Alias  *int   `json:"alias,omitempty"` // Buffer.Alias; absent for -1
}

type stepJSON struct {
	Kind   string `json:"kind"`             // "kernel" or "copy"
	Kernel string `json:"kernel,omitempty"` // op/dtype of the result
	Args   []int  `json:"args"`
	Out    int    `json:"out"`
}

type tensorJSON struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Offset int64  `json:"offset"` // into the data section after the JSON
	Size   int64  `json:"size"`
}

// GraphHash returns the SHA-256 of the plan's graph in canonical text, in
// hex: plans of the same graph have the same hash.
func (p *Plan) GraphHash() string {
	sum := sha256.Sum256([]byte(p.Graph.Format()))
	return hex.EncodeToString(sum[:])
}

// Encode writes f in the plan file format: the magic "KILNPLAN", the format
// version and flags (uint32), the payload length (uint64) and the payload's
// SHA-256, all little-endian, then the payload: a uint64 length, a JSON
// document (plans, params' names and types, metadata) and the params' raw
// bytes. Nothing in it depends on the machine that wrote it.
func Encode(w io.Writer, f *File) error {
	var payload filePayload
	payload.Plans = map[string]planJSON{}
	payload.Meta = f.Meta
	version := uint32(2)
	for _, n := range sortedKeys(f.Plans) {
		payload.Plans[n] = encodePlan(f.Plans[n])
		if f.Plans[n].ChunkBytes != 0 {
			version = max(version, 3)
		}
		if hasFrozen(f.Plans[n].Graph) {
			version = 4
		}
	}
	var data bytes.Buffer
	for _, t := range f.Params {
		if len(t.Data) != t.Type.Bytes() {
			return fmt.Errorf("param %q: %d bytes for %s", t.Name, len(t.Data), t.Type)
		}
		payload.Params = append(payload.Params, tensorJSON{t.Name, t.Type.String(), int64(data.Len()), int64(len(t.Data))})
		data.Write(t.Data)
	}
	doc, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	_, err = w.Write(pack(version, doc, data.Bytes()))
	return err
}

// pack lays out a plan file: the header (magic, version, flags, payload
// length, the payload's SHA-256), then the payload (the document's length,
// the document, the data).
func pack(version uint32, doc, data []byte) []byte {
	out := make([]byte, 0, headerSize+8+len(doc)+len(data))
	out = append(out, fileMagic[:]...)
	out = binary.LittleEndian.AppendUint32(out, version)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint64(out, uint64(8+len(doc)+len(data)))
	out = append(out, make([]byte, sha256.Size)...)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(doc)))
	out = append(out, doc...)
	out = append(out, data...)
	sum := sha256.Sum256(out[headerSize:])
	copy(out[24:headerSize], sum[:])
	return out
}

func encodePlan(p *Plan) planJSON {
	j := planJSON{
		Graph: p.Graph.Format(), GraphHash: p.GraphHash(),
		ArenaBytes: p.ArenaBytes, LowerBound: p.LowerBound, ChunkBytes: p.ChunkBytes,
		Outputs: p.Outputs, Grads: p.Grads,
	}
	for _, b := range p.Buffers {
		bj := bufferJSON{b.Name, b.Type.String(), b.Role.String(), b.Offset, b.Size, b.Start, b.End, nil}
		if b.Alias >= 0 {
			bj.Alias = &b.Alias
		}
		j.Buffers = append(j.Buffers, bj)
	}
	for _, s := range p.Steps {
		sj := stepJSON{Kind: "kernel", Args: s.Args, Out: s.Out}
		if s.Kind == Copy {
			sj.Kind = "copy"
		} else {
			sj.Kernel = s.Op.String() + "/" + p.Buffers[s.Out].Type.DType.String()
		}
		if sj.Args == nil {
			sj.Args = []int{}
		}
		j.Steps = append(j.Steps, sj)
	}
	return j
}

// Decode reads a plan file. It refuses, with an error saying which, a file
// that is not a plan file, is truncated, fails its checksum, was written by
// a newer version of kiln, holds a graph that fails ir.Check or a plan
// that fails Check against its graph, a TrainPlan that is not a training
// step or an EvalPlan that is not an evaluation graph, or an initial value
// that is not of a param of its plans. It never panics on any input.
func Decode(r io.Reader) (*File, error) {
	version, doc, data, err := unpack(r)
	if err != nil {
		return nil, err
	}
	return decodeDoc(version, doc, data)
}

// unpack reads the header and the payload of a plan file, checks them and
// returns the format version, the JSON document and the data after it.
func unpack(r io.Reader) (version uint32, doc, data []byte, err error) {
	var head [headerSize]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, nil, fmt.Errorf("not a kiln plan file: too short for the %d-byte header", headerSize)
	}
	if !bytes.Equal(head[:8], fileMagic[:]) {
		return 0, nil, nil, fmt.Errorf("not a kiln plan file: it does not start with %q", fileMagic[:])
	}
	version = binary.LittleEndian.Uint32(head[8:])
	if version > FileVersion {
		return 0, nil, nil, fmt.Errorf("plan file format version %d is newer than this kiln reads (%d); recompile it or update kiln", version, FileVersion)
	}
	if version == 0 {
		return 0, nil, nil, fmt.Errorf("plan file format version 0 is not valid")
	}
	n := binary.LittleEndian.Uint64(head[16:])
	const maxPayload = 1 << 40
	if n > maxPayload {
		return 0, nil, nil, fmt.Errorf("corrupted plan file: payload length %d", n)
	}
	body, err := io.ReadAll(io.LimitReader(r, int64(n)+1))
	if err != nil {
		return 0, nil, nil, err
	}
	if uint64(len(body)) < n {
		return 0, nil, nil, fmt.Errorf("truncated plan file: %d of %d payload bytes", len(body), n)
	}
	if uint64(len(body)) > n {
		return 0, nil, nil, fmt.Errorf("corrupted plan file: data after the %d-byte payload", n)
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], head[24:]) {
		return 0, nil, nil, fmt.Errorf("corrupted plan file: checksum mismatch")
	}
	if len(body) < 8 {
		return 0, nil, nil, fmt.Errorf("corrupted plan file: no document")
	}
	docLen := binary.LittleEndian.Uint64(body)
	if docLen > uint64(len(body)-8) {
		return 0, nil, nil, fmt.Errorf("corrupted plan file: document length %d beyond the payload", docLen)
	}
	return version, body[8 : 8+docLen], body[8+docLen:], nil
}

// decodeDoc decodes the JSON document of a plan file of the given version
// and the params' data after it, and validates what it holds.
func decodeDoc(version uint32, doc, data []byte) (*File, error) {
	var payload filePayload
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&payload); err != nil {
		return nil, fmt.Errorf("corrupted plan file: %s", clip(err.Error()))
	}
	if dec.More() {
		return nil, fmt.Errorf("corrupted plan file: data after the JSON document")
	}
	f := &File{Plans: map[string]*Plan{}, Meta: payload.Meta}
	for _, name := range sortedKeys(payload.Plans) {
		p, err := decodePlan(payload.Plans[name], version)
		if err == nil {
			switch name {
			case TrainPlan:
				err = p.CheckTraining()
			case EvalPlan:
				err = p.CheckEvaluation()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("plan %q: %w", clip(name), err)
		}
		f.Plans[name] = p
	}
	seen := map[string]bool{}
	for _, tj := range payload.Params {
		t, err := ir.ParseType(tj.Type)
		if err != nil {
			return nil, fmt.Errorf("param %q: %v", clip(tj.Name), err)
		}
		if tj.Offset < 0 || tj.Size != int64(t.Bytes()) || tj.Offset > int64(len(data))-tj.Size {
			return nil, fmt.Errorf("param %q: %d bytes at %d do not fit %s in %d bytes of data", clip(tj.Name), tj.Size, tj.Offset, t, len(data))
		}
		if err := f.checkParam(tj.Name, t); err != nil {
			return nil, err
		}
		if seen[tj.Name] {
			return nil, fmt.Errorf("param %q: given twice", clip(tj.Name))
		}
		seen[tj.Name] = true
		f.Params = append(f.Params, Tensor{tj.Name, t, append([]byte(nil), data[tj.Offset:tj.Offset+tj.Size]...)})
	}
	return f, nil
}

// hasFrozen reports whether g has a frozen param (version 4).
func hasFrozen(g *ir.Graph) bool {
	return slices.ContainsFunc(g.Params(), g.Frozen)
}

func decodePlan(j planJSON, version uint32) (*Plan, error) {
	g, err := ir.Parse("plan graph", []byte(j.Graph))
	if err != nil {
		return nil, err
	}
	if err := ir.Check(g); err != nil {
		return nil, err
	}
	if j.ChunkBytes != 0 && version < 3 {
		return nil, fmt.Errorf("chunk_bytes %d in a version %d file, which has no chunks", j.ChunkBytes, version)
	}
	if hasFrozen(g) && version < 4 {
		return nil, fmt.Errorf("a frozen param in a version %d file, which has none", version)
	}
	p := &Plan{Graph: g, ArenaBytes: j.ArenaBytes, LowerBound: j.LowerBound, ChunkBytes: j.ChunkBytes, Outputs: j.Outputs, Grads: j.Grads}
	if h := p.GraphHash(); h != j.GraphHash {
		return nil, fmt.Errorf("graph hash %s does not match the recorded %s", h, clip(j.GraphHash))
	}
	if len(j.Buffers) != len(g.Values) {
		return nil, fmt.Errorf("%d buffers for the graph's %d values", len(j.Buffers), len(g.Values))
	}
	for i, bj := range j.Buffers {
		t, err := ir.ParseType(bj.Type)
		if err != nil {
			return nil, fmt.Errorf("buffer %d: %v", i, err)
		}
		role, ok := parseRole(bj.Role)
		if !ok {
			return nil, fmt.Errorf("buffer %%%s: unknown role %q", clip(bj.Name), clip(bj.Role))
		}
		alias := -1
		if bj.Alias != nil {
			if version < 2 {
				return nil, fmt.Errorf("buffer %%%s: an alias in a version %d file, which has none", clip(bj.Name), version)
			}
			if alias = *bj.Alias; alias < 0 || alias >= len(j.Buffers) {
				return nil, fmt.Errorf("buffer %%%s: alias %d is not a buffer index (0..%d)", clip(bj.Name), alias, len(j.Buffers)-1)
			}
		}
		p.Buffers = append(p.Buffers, Buffer{Value: ir.ID(i), Name: bj.Name, Type: t, Role: role, Offset: bj.Offset, Size: bj.Size, Start: bj.Start, End: bj.End, Alias: alias})
		switch role {
		case Input:
			p.Inputs = append(p.Inputs, i)
		case Param:
			p.Params = append(p.Params, i)
		case State:
			p.States = append(p.States, i)
		}
	}
	for k, sj := range j.Steps {
		if sj.Out < 0 || sj.Out >= len(p.Buffers) {
			return nil, fmt.Errorf("step %d writes buffer %d of %d", k, sj.Out, len(p.Buffers))
		}
		switch sj.Kind {
		case "copy":
			p.Steps = append(p.Steps, Step{Kind: Copy, Args: sj.Args, Out: sj.Out})
		case "kernel":
			// The file names the kernel so that a plan cannot silently
			// change what runs: the op comes from the graph, and Check
			// proves the step computes the graph's value.
			v := g.Value(ir.ID(sj.Out))
			if want := v.Op.String() + "/" + v.Type.DType.String(); sj.Kernel != want {
				return nil, fmt.Errorf("step %d runs kernel %q, but %%%s needs %q", k, clip(sj.Kernel), v.Name, want)
			}
			p.Steps = append(p.Steps, Step{Kind: Kernel, Op: v.Op, Attrs: v.Attrs, Args: sj.Args, Out: sj.Out})
		default:
			return nil, fmt.Errorf("step %d: unknown kind %q", k, clip(sj.Kind))
		}
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return p, nil
}

// checkParam reports whether an initial value of type t may be given for
// the param called name: some plan of f has that param, and no plan has a
// buffer of that name that is not a param of type t.
func (f *File) checkParam(name string, t ir.Type) error {
	found := false
	for _, pn := range sortedKeys(f.Plans) {
		p := f.Plans[pn]
		for _, b := range p.Buffers {
			if b.Name != name {
				continue
			}
			if b.Role != Param || !b.Type.Equal(t) {
				return fmt.Errorf("param %q: %s, plan %q has %%%s: %s (%s)", clip(name), t, clip(pn), b.Name, b.Type, b.Role)
			}
			found = true
		}
	}
	if !found {
		return fmt.Errorf("param %q: no plan in the file has a param of that name", clip(name))
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func parseRole(s string) (Role, bool) {
	for r, n := range roleNames {
		if n == s {
			return Role(r), true
		}
	}
	return 0, false
}

// roleOf returns the role of the buffer of a value computed by op: the
// leaves' own, Temp for everything computed.
func roleOf(op ir.Op) Role {
	switch op {
	case ir.OpInput:
		return Input
	case ir.OpParam:
		return Param
	case ir.OpState:
		return State
	}
	return Temp
}

// Save writes f to path atomically: to a temporary file in the same
// directory, synced, then renamed over path, so a failure never leaves a
// half-written plan file.
func Save(path string, f *File) error {
	var buf bytes.Buffer
	if err := Encode(&buf, f); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

// Load reads the plan file at path; its errors start with the path.
func Load(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	f, err := Decode(fh)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}
