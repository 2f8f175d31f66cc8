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
const FileVersion = 3

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
	names := make([]string, 0, len(f.Plans))
	for n := range f.Plans {
		names = append(names, n)
	}
	sort.Strings(names)
	version := uint32(2)
	for _, n := range names {
		payload.Plans[n] = encodePlan(f.Plans[n])
		if f.Plans[n].ChunkBytes != 0 {
			version = 3
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
	var body bytes.Buffer
	binary.Write(&body, binary.LittleEndian, uint64(len(doc)))
	body.Write(doc)
	body.Write(data.Bytes())
	sum := sha256.Sum256(body.Bytes())
	var head bytes.Buffer
	head.Write(fileMagic[:])
	binary.Write(&head, binary.LittleEndian, version)
	binary.Write(&head, binary.LittleEndian, uint32(0))
	binary.Write(&head, binary.LittleEndian, uint64(body.Len()))
	head.Write(sum[:])
	if _, err := w.Write(head.Bytes()); err != nil {
		return err
	}
	_, err = w.Write(body.Bytes())
	return err
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
// a newer version of kiln, or holds a plan that does not match its graph or
// fails Check.
func Decode(r io.Reader) (*File, error) {
	var head [headerSize]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, fmt.Errorf("not a kiln plan file: too short for the %d-byte header", headerSize)
	}
	if !bytes.Equal(head[:8], fileMagic[:]) {
		return nil, fmt.Errorf("not a kiln plan file: it does not start with %q", fileMagic[:])
	}
	version := binary.LittleEndian.Uint32(head[8:])
	if version > FileVersion {
		return nil, fmt.Errorf("plan file format version %d is newer than this kiln reads (%d); recompile it or update kiln", version, FileVersion)
	}
	if version == 0 {
		return nil, fmt.Errorf("plan file format version 0 is not valid")
	}
	n := binary.LittleEndian.Uint64(head[16:])
	const maxPayload = 1 << 40
	if n > maxPayload {
		return nil, fmt.Errorf("corrupted plan file: payload length %d", n)
	}
	body, err := io.ReadAll(io.LimitReader(r, int64(n)+1))
	if err != nil {
		return nil, err
	}
	if uint64(len(body)) < n {
		return nil, fmt.Errorf("truncated plan file: %d of %d payload bytes", len(body), n)
	}
	if uint64(len(body)) > n {
		return nil, fmt.Errorf("corrupted plan file: data after the %d-byte payload", n)
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], head[24:]) {
		return nil, fmt.Errorf("corrupted plan file: checksum mismatch")
	}
	if len(body) < 8 {
		return nil, fmt.Errorf("corrupted plan file: no document")
	}
	docLen := binary.LittleEndian.Uint64(body)
	if docLen > uint64(len(body)-8) {
		return nil, fmt.Errorf("corrupted plan file: document length %d beyond the payload", docLen)
	}
	var payload filePayload
	dec := json.NewDecoder(bytes.NewReader(body[8 : 8+docLen]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&payload); err != nil {
		return nil, fmt.Errorf("corrupted plan file: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("corrupted plan file: data after the JSON document")
	}
	data := body[8+docLen:]
	f := &File{Plans: map[string]*Plan{}, Meta: payload.Meta}
	for name, pj := range payload.Plans {
		p, err := decodePlan(pj, version)
		if err != nil {
			return nil, fmt.Errorf("plan %q: %w", name, err)
		}
		f.Plans[name] = p
	}
	for _, tj := range payload.Params {
		t, err := ir.ParseType(tj.Type)
		if err != nil {
			return nil, fmt.Errorf("param %q: %v", tj.Name, err)
		}
		if tj.Offset < 0 || tj.Size != int64(t.Bytes()) || tj.Offset+tj.Size > int64(len(data)) {
			return nil, fmt.Errorf("param %q: %d bytes at %d do not fit %s in %d bytes of data", tj.Name, tj.Size, tj.Offset, t, len(data))
		}
		f.Params = append(f.Params, Tensor{tj.Name, t, append([]byte(nil), data[tj.Offset:tj.Offset+tj.Size]...)})
	}
	return f, nil
}

func decodePlan(j planJSON, version uint32) (*Plan, error) {
	g, err := ir.Parse("plan graph", []byte(j.Graph))
	if err != nil {
		return nil, err
	}
	if j.ChunkBytes != 0 && version < 3 {
		return nil, fmt.Errorf("chunk_bytes %d in a version %d file, which has no chunks", j.ChunkBytes, version)
	}
	p := &Plan{Graph: g, ArenaBytes: j.ArenaBytes, LowerBound: j.LowerBound, ChunkBytes: j.ChunkBytes, Outputs: j.Outputs, Grads: j.Grads}
	if h := p.GraphHash(); h != j.GraphHash {
		return nil, fmt.Errorf("graph hash %s does not match the recorded %s", h, j.GraphHash)
	}
	if len(j.Buffers) != len(g.Values) {
		return nil, fmt.Errorf("%d buffers for %d values", len(j.Buffers), len(g.Values))
	}
	for i, bj := range j.Buffers {
		v := g.Value(ir.ID(i))
		t, err := ir.ParseType(bj.Type)
		if err != nil {
			return nil, fmt.Errorf("buffer %d: %v", i, err)
		}
		if bj.Name != v.Name || !t.Equal(v.Type) {
			return nil, fmt.Errorf("buffer %d is %%%s: %s, the graph's value %d is %%%s: %s", i, bj.Name, t, i, v.Name, v.Type)
		}
		role, ok := parseRole(bj.Role)
		if !ok {
			return nil, fmt.Errorf("buffer %%%s: unknown role %q", bj.Name, bj.Role)
		}
		if want := roleOf(v.Op); role != want {
			return nil, fmt.Errorf("buffer %%%s: role %s, but the value is a %s", bj.Name, role, v.Op)
		}
		if bj.Size != int64(t.Bytes()) {
			return nil, fmt.Errorf("buffer %%%s: size %d, %s needs %d", bj.Name, bj.Size, t, t.Bytes())
		}
		alias := -1
		if bj.Alias != nil {
			if version < 2 {
				return nil, fmt.Errorf("buffer %%%s: an alias in a version %d file, which has none", bj.Name, version)
			}
			if alias = *bj.Alias; alias < 0 || alias >= len(j.Buffers) {
				return nil, fmt.Errorf("buffer %%%s: alias %d is not a buffer index (0..%d)", bj.Name, alias, len(j.Buffers)-1)
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
	valid := func(b int) bool { return b >= 0 && b < len(p.Buffers) }
	for k, sj := range j.Steps {
		if !valid(sj.Out) {
			return nil, fmt.Errorf("step %d writes buffer %d of %d", k, sj.Out, len(p.Buffers))
		}
		for _, a := range sj.Args {
			if !valid(a) {
				return nil, fmt.Errorf("step %d reads buffer %d of %d", k, a, len(p.Buffers))
			}
		}
		v := g.Value(ir.ID(sj.Out))
		switch sj.Kind {
		case "copy":
			if len(sj.Args) != 1 {
				return nil, fmt.Errorf("step %d: a copy takes one buffer, found %d", k, len(sj.Args))
			}
			p.Steps = append(p.Steps, Step{Kind: Copy, Args: sj.Args, Out: sj.Out})
		case "kernel":
			if want := v.Op.String() + "/" + v.Type.DType.String(); sj.Kernel != want {
				return nil, fmt.Errorf("step %d runs kernel %q, but %%%s needs %q", k, sj.Kernel, v.Name, want)
			}
			if len(sj.Args) != len(v.Args) {
				return nil, fmt.Errorf("step %d: %d arguments for %%%s, which takes %d", k, len(sj.Args), v.Name, len(v.Args))
			}
			for i, a := range sj.Args {
				if ir.ID(a) != v.Args[i] {
					return nil, fmt.Errorf("step %d: argument %d is buffer %d, %%%s reads value %d", k, i, a, v.Name, v.Args[i])
				}
			}
			p.Steps = append(p.Steps, Step{Kind: Kernel, Op: v.Op, Attrs: v.Attrs, Args: sj.Args, Out: sj.Out})
		default:
			return nil, fmt.Errorf("step %d: unknown kind %q", k, sj.Kind)
		}
	}
	for _, n := range append(append([]Named(nil), p.Outputs...), p.Grads...) {
		if !valid(n.Buffer) {
			return nil, fmt.Errorf("%s names buffer %d of %d", n.Name, n.Buffer, len(p.Buffers))
		}
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return p, nil
}

func parseRole(s string) (Role, bool) {
	for r, n := range roleNames {
		if n == s {
			return Role(r), true
		}
	}
	return 0, false
}

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
