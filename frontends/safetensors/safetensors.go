// Package safetensors reads and writes tensors in the safetensors file format
// (https://github.com/huggingface/safetensors).
//
// A safetensors file is an 8-byte little-endian unsigned header length N,
// then N bytes of UTF-8 JSON header, then the raw tensor data. The header maps
// each tensor name to its dtype, shape and data_offsets (a [begin, end) byte
// range relative to the start of the data that follows the header); the
// optional "__metadata__" entry maps strings to strings:
//
//	{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}
//
// kiln supports the dtypes F32, F64, I32, I64 and BOOL, which correspond to
// ir.F32, ir.F64, ir.I32, ir.I64 and ir.Bool. Files holding any other dtype
// (F16, BF16, U8, ...) are rejected with an error naming the tensor.
//
// Tensor data is kept as raw little-endian bytes, exactly as stored in the
// file. The package assumes a little-endian host, so that those bytes can be
// reinterpreted in place as native values by the executors; Encode and Decode
// return an error on a big-endian host rather than hand out bytes that would
// be misread there.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kilnml/kiln/internal/atomicfile"
	"github.com/kilnml/kiln/internal/sysmem"

	"github.com/kilnml/kiln/ir"
)

// Tensor is one named tensor: its type and its raw little-endian bytes
// (len(Data) == Type.Bytes()).
type Tensor struct {
	Name string
	Type ir.Type
	Data []byte
}

// metadataKey is the reserved header key holding the string-to-string metadata.
const metadataKey = "__metadata__"

// supported lists the dtypes kiln reads, for error messages.
const supported = "F32, F64, I32, I64, BOOL"

var dtypeToName = map[ir.DType]string{
	ir.F32:  "F32",
	ir.F64:  "F64",
	ir.I32:  "I32",
	ir.I64:  "I64",
	ir.Bool: "BOOL",
}

var nameToDType = map[string]ir.DType{
	"F32":  ir.F32,
	"F64":  ir.F64,
	"I32":  ir.I32,
	"I64":  ir.I64,
	"BOOL": ir.Bool,
}

// hostIsLittleEndian reports whether the machine stores integers least
// significant byte first.
func hostIsLittleEndian() bool {
	return binary.NativeEndian.Uint16([]byte{1, 0}) == 1
}

// errBigEndian is returned by Encode and Decode on a big-endian host.
var errBigEndian = errors.New("big-endian hosts are not supported: tensor data is little-endian and kiln uses it in place")

// Decode parses a safetensors file held in data. The tensors come back sorted
// by name, each with a copy of its bytes; metadata is nil when the header has
// no "__metadata__" entry.
//
// Every tensor's type must be within ir.MaxTensorBytes, and its
// data_offsets must hold exactly dtype size × elements bytes. As in the
// reference implementation, the tensors, taken in the order of their
// offsets, must fill the data section exactly: no overlap, no unused bytes
// between them or after the last one. Unknown fields in a tensor's entry
// are ignored.
func Decode(data []byte) (tensors []Tensor, metadata map[string]string, err error) {
	tensors, metadata, err = decode(data, true)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	return tensors, metadata, nil
}

// ReadFile reads and decodes the safetensors file at path, as Decode does,
// except that the tensors' Data share the one buffer read from the file
// rather than being copied. Errors start with the path.
//
// A file larger than the memory available is refused before it is read.
func ReadFile(path string) ([]Tensor, map[string]string, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		if err := sysmem.Check("file", fi.Size()); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err // *fs.PathError already names the file
	}
	// The buffer is ours, so the tensors may alias it.
	tensors, metadata, err := decode(data, false)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return tensors, metadata, nil
}

// headerEntry is one tensor's description in the JSON header. Pointers tell
// a missing field from a zero one.
type headerEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// span is one tensor's validated byte range, for the overlap check.
type span struct {
	name       string
	begin, end int
}

// decode does the work of Decode; the returned error carries no prefix. When
// copyData is false the tensors' Data alias data.
func decode(data []byte, copyData bool) ([]Tensor, map[string]string, error) {
	if !hostIsLittleEndian() {
		return nil, nil, errBigEndian
	}
	if len(data) < 8 {
		return nil, nil, fmt.Errorf("truncated file: %d bytes, need at least 8 for the header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data[:8])
	rest := uint64(len(data) - 8)
	if n > rest {
		return nil, nil, fmt.Errorf("header length %d is larger than the file: only %d bytes follow the length", n, rest)
	}
	header := data[8 : 8+n]
	buf := data[8+n:]
	if !utf8.Valid(header) {
		return nil, nil, errors.New("invalid JSON header: not valid UTF-8")
	}
	if trimmed := bytes.TrimLeft(header, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, nil, errors.New("invalid JSON header: does not start with '{'")
	}

	dec := json.NewDecoder(bytes.NewReader(header))
	if _, err := dec.Token(); err != nil { // the opening '{', checked above
		return nil, nil, fmt.Errorf("invalid JSON header: %s", oneLine(err))
	}
	var (
		tensors  []Tensor
		spans    []span
		metadata map[string]string
		seen     = map[string]bool{}
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("invalid JSON header: %s", oneLine(err))
		}
		name, ok := tok.(string)
		if !ok {
			return nil, nil, fmt.Errorf("invalid JSON header: unexpected %v where a key was expected", tok)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("invalid JSON header: key %q appears more than once", ir.Excerpt(name))
		}
		seen[name] = true

		if name == metadataKey {
			if err := decodeMetadata(dec, &metadata); err != nil {
				return nil, nil, err
			}
			continue
		}

		var e headerEntry
		if err := dec.Decode(&e); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, nil, fmt.Errorf("invalid JSON header: %s", oneLine(err))
			}
			return nil, nil, fmt.Errorf("tensor %q: %s", ir.Excerpt(name), describeEntryError(err))
		}
		t, sp, err := checkEntry(name, e, buf)
		if err != nil {
			return nil, nil, err
		}
		if copyData {
			t.Data = bytes.Clone(buf[sp.begin:sp.end])
			if t.Data == nil {
				t.Data = []byte{}
			}
		} else {
			t.Data = buf[sp.begin:sp.end:sp.end]
		}
		tensors = append(tensors, t)
		spans = append(spans, sp)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, nil, fmt.Errorf("invalid JSON header: %s", oneLine(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("invalid JSON header: unexpected data after the closing '}'")
	}

	if err := checkLayout(spans, len(buf)); err != nil {
		return nil, nil, err
	}

	slices.SortFunc(tensors, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	return tensors, metadata, nil
}

// checkLayout requires the tensors' byte ranges, in the order of their
// offsets, to fill the n-byte data section exactly, as the format does: each
// starts where the one before it ends, the first at 0, and the last ends at
// n. A zero-size tensor counts as a range of its own.
func checkLayout(spans []span, n int) error {
	slices.SortFunc(spans, func(a, b span) int {
		if a.begin != b.begin {
			return a.begin - b.begin
		}
		if a.end != b.end {
			return a.end - b.end
		}
		return strings.Compare(a.name, b.name)
	})
	var prev *span
	pos := 0
	for i := range spans {
		s := &spans[i]
		switch {
		case s.begin < pos:
			return fmt.Errorf("tensor %q: data_offsets [%d,%d] overlap tensor %q at [%d,%d]",
				ir.Excerpt(s.name), s.begin, s.end, ir.Excerpt(prev.name), prev.begin, prev.end)
		case s.begin > pos && prev == nil:
			return fmt.Errorf("tensor %q: data_offsets [%d,%d] leave bytes [0,%d] unused at the start of the data section; the format forbids gaps",
				ir.Excerpt(s.name), s.begin, s.end, s.begin)
		case s.begin > pos:
			return fmt.Errorf("tensor %q: data_offsets [%d,%d] leave bytes [%d,%d] unused after tensor %q at [%d,%d]; the format forbids gaps",
				ir.Excerpt(s.name), s.begin, s.end, pos, s.begin, ir.Excerpt(prev.name), prev.begin, prev.end)
		}
		if s.end > s.begin || prev == nil || prev.end == prev.begin {
			prev = s
		}
		pos = s.end
	}
	switch {
	case pos == n:
		return nil
	case prev == nil:
		return fmt.Errorf("%d bytes of data after a header that lists no tensors; the format forbids trailing bytes", n)
	}
	return fmt.Errorf("%d bytes after the last tensor (%q ends at %d of the %d-byte data section); the format forbids trailing bytes",
		n-pos, ir.Excerpt(prev.name), pos, n)
}

// decodeMetadata reads the "__metadata__" value: an object of strings, or null.
func decodeMetadata(dec *json.Decoder, metadata *map[string]string) error {
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("invalid JSON header: %s", oneLine(err))
		}
		return fmt.Errorf("invalid %s: must be an object of strings: %s", metadataKey, oneLine(err))
	}
	if raw == nil {
		return nil
	}
	m := make(map[string]string, len(raw))
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("invalid %s: value of %q is not a string", metadataKey, k)
		}
		m[k] = s
	}
	*metadata = m
	return nil
}

// checkEntry validates one header entry against the data buffer.
func checkEntry(name string, e headerEntry, buf []byte) (Tensor, span, error) {
	fail := func(format string, args ...any) (Tensor, span, error) {
		return Tensor{}, span{}, fmt.Errorf("tensor %q: "+format, append([]any{ir.Excerpt(name)}, args...)...)
	}
	switch {
	case e.DType == nil:
		return fail("missing dtype")
	case e.Shape == nil:
		return fail("missing shape")
	case e.DataOffsets == nil:
		return fail("missing data_offsets")
	}
	dt, ok := nameToDType[*e.DType]
	if !ok {
		return fail("dtype %s is not supported (kiln reads %s)", *e.DType, supported)
	}

	off := *e.DataOffsets
	if len(off) != 2 {
		return fail("data_offsets must be [begin, end], found %d numbers", len(off))
	}
	begin, end := off[0], off[1]
	if begin < 0 || end < begin {
		return fail("invalid data_offsets [%d,%d]", begin, end)
	}
	if end > int64(len(buf)) {
		return fail("data_offsets [%d,%d] run past the end of the %d-byte data section", begin, end, len(buf))
	}

	shape := make(ir.Shape, len(*e.Shape))
	for i, d := range *e.Shape {
		if d < 0 {
			return fail("negative dimension %d in shape %s", d, fmtDims(*e.Shape))
		}
		if int64(int(d)) != d { // only possible where int is 32 bits
			return fail("dimension %d in shape %s is too large", d, fmtDims(*e.Shape))
		}
		shape[i] = int(d)
	}
	nbytes, err := ir.Type{DType: dt, Shape: shape}.BytesChecked()
	if err != nil {
		return fail("%v", err)
	}
	if end-begin != int64(nbytes) {
		return fail("data_offsets [%d,%d] hold %d bytes, but %s%s needs %d", begin, end, end-begin, *e.DType, shape, nbytes)
	}
	return Tensor{Name: name, Type: ir.Type{DType: dt, Shape: shape}},
		span{name: name, begin: int(begin), end: int(end)}, nil
}

// describeEntryError explains why a tensor's header entry did not decode,
// in terms of the file format rather than Go types.
func describeEntryError(err error) string {
	var ute *json.UnmarshalTypeError
	if !errors.As(err, &ute) {
		return "invalid header entry: " + oneLine(err)
	}
	field := ute.Field
	if i := strings.IndexByte(field, '.'); i >= 0 {
		field = field[:i]
	}
	switch field {
	case "":
		return fmt.Sprintf("header entry must be an object with dtype, shape and data_offsets, found a JSON %s", ute.Value)
	case "dtype":
		return fmt.Sprintf("dtype must be a string, found a JSON %s", ute.Value)
	case "shape":
		return fmt.Sprintf("shape must be an array of non-negative integers, found a JSON %s", ute.Value)
	case "data_offsets":
		return fmt.Sprintf("data_offsets must be an array of two non-negative integers, found a JSON %s", ute.Value)
	}
	return "invalid header entry: " + oneLine(err)
}

// fmtDims formats header dimensions as [d0,d1,...].
func fmtDims(dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// oneLine flattens an error message onto one line.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// Encode serializes tensors and metadata as a safetensors file. The header
// lists "__metadata__" first (omitted when metadata is empty), then the
// tensors sorted by name; the data is laid out in the same order. The header
// is padded with spaces to a multiple of 8 bytes, as the reference
// implementation does, so that the data starts aligned. The output depends
// only on the arguments.
func Encode(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	out, err := encode(tensors, metadata)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return out, nil
}

// encode does the work of Encode; the returned error carries no prefix.
func encode(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	if !hostIsLittleEndian() {
		return nil, errBigEndian
	}
	sorted := slices.Clone(tensors)
	slices.SortStableFunc(sorted, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	for i, t := range sorted {
		if i > 0 && sorted[i-1].Name == t.Name {
			return nil, fmt.Errorf("tensor %q: duplicate name", t.Name)
		}
		if err := checkTensor(t); err != nil {
			return nil, err
		}
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("%s key %q: key and value must be valid UTF-8", metadataKey, k)
		}
	}

	var h bytes.Buffer
	h.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		h.WriteString(quote(metadataKey))
		h.WriteString(":{")
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			h.WriteString(quote(k))
			h.WriteByte(':')
			h.WriteString(quote(metadata[k]))
		}
		h.WriteByte('}')
		first = false
	}
	offset := 0
	for _, t := range sorted {
		if !first {
			h.WriteByte(',')
		}
		first = false
		h.WriteString(quote(t.Name))
		h.WriteString(`:{"dtype":`)
		h.WriteString(quote(dtypeToName[t.Type.DType]))
		h.WriteString(`,"shape":[`)
		for i, d := range t.Type.Shape {
			if i > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		h.WriteString(`],"data_offsets":[`)
		h.WriteString(strconv.Itoa(offset))
		h.WriteByte(',')
		offset += len(t.Data)
		h.WriteString(strconv.Itoa(offset))
		h.WriteString("]}")
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}

	out := make([]byte, 8, 8+h.Len()+offset)
	binary.LittleEndian.PutUint64(out, uint64(h.Len()))
	out = append(out, h.Bytes()...)
	for _, t := range sorted {
		out = append(out, t.Data...)
	}
	return out, nil
}

// checkTensor validates a tensor for Encode.
func checkTensor(t Tensor) error {
	if t.Name == metadataKey {
		return fmt.Errorf("tensor %q: the name is reserved for metadata", t.Name)
	}
	if !utf8.ValidString(t.Name) {
		return fmt.Errorf("tensor %q: name is not valid UTF-8", t.Name)
	}
	if _, ok := dtypeToName[t.Type.DType]; !ok {
		return fmt.Errorf("tensor %q: dtype %s is not supported (kiln writes %s)", t.Name, t.Type.DType, supported)
	}
	for _, d := range t.Type.Shape {
		if d < 0 {
			return fmt.Errorf("tensor %q: negative dimension %d in shape %v", t.Name, d, t.Type.Shape)
		}
	}
	want, err := t.Type.BytesChecked()
	if err != nil {
		return fmt.Errorf("tensor %q: %v", t.Name, err)
	}
	if len(t.Data) != want {
		return fmt.Errorf("tensor %q: %d bytes of data, but %v needs %d", t.Name, len(t.Data), t.Type, want)
	}
	return nil
}

// quote returns s as a JSON string, without HTML escaping, as serde_json
// writes it.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil { // cannot fail for a string
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// WriteFile encodes tensors and metadata and writes them to path atomically:
// the bytes go to a temporary file in the same directory, which is synced
// and then renamed over path, so that path holds either its old contents or
// the complete new file, never a partial one. Errors start with the path.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) (err error) {
	data, err := encode(tensors, metadata)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("%s: %w", path, errors.Unwrap(err)) // an *os.PathError naming path
	}
	return nil
}

// FromFloat64 builds a tensor of dtype dt and the given shape from v, which
// holds the elements in row-major order. Integer dtypes require integral
// values within range; Bool requires 0 or 1; F32 rejects finite values
// beyond its range (NaN and infinities are kept).
func FromFloat64(name string, dt ir.DType, shape ir.Shape, v []float64) (Tensor, error) {
	if _, ok := dtypeToName[dt]; !ok {
		return Tensor{}, fmt.Errorf("tensor %q: dtype %s is not supported (kiln writes %s)", name, dt, supported)
	}
	for _, d := range shape {
		if d < 0 {
			return Tensor{}, fmt.Errorf("tensor %q: negative dimension %d in shape %v", name, d, shape)
		}
	}
	typ := ir.Type{DType: dt, Shape: shape.Clone()}
	if _, err := typ.BytesChecked(); err != nil {
		return Tensor{}, fmt.Errorf("tensor %q: %v", name, err)
	}
	if n := shape.NumElements(); n != len(v) {
		return Tensor{}, fmt.Errorf("tensor %q: %d values for shape %v, which has %d elements", name, len(v), shape, n)
	}
	size := dt.Size()
	data := make([]byte, len(v)*size)
	bad := func(i int, x float64) error {
		return fmt.Errorf("tensor %q: element %d = %v cannot be represented as %s", name, i, x, dt)
	}
	for i, x := range v {
		b := data[i*size:]
		switch dt {
		case ir.F32:
			f := float32(x)
			if math.IsInf(float64(f), 0) && !math.IsInf(x, 0) {
				return Tensor{}, bad(i, x)
			}
			binary.LittleEndian.PutUint32(b, math.Float32bits(f))
		case ir.F64:
			binary.LittleEndian.PutUint64(b, math.Float64bits(x))
		case ir.I32:
			if x != math.Trunc(x) || x < math.MinInt32 || x > math.MaxInt32 {
				return Tensor{}, bad(i, x)
			}
			binary.LittleEndian.PutUint32(b, uint32(int32(x)))
		case ir.I64:
			// 2^63 itself is out of range; -2^63 is in.
			if x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
				return Tensor{}, bad(i, x)
			}
			binary.LittleEndian.PutUint64(b, uint64(int64(x)))
		case ir.Bool:
			switch x {
			case 0:
				b[0] = 0
			case 1:
				b[0] = 1
			default:
				return Tensor{}, bad(i, x)
			}
		}
	}
	return Tensor{Name: name, Type: typ, Data: data}, nil
}

// Float64s converts the tensor's elements to float64, whatever its dtype.
// Bool elements become 0 or 1 (any nonzero byte is true); I64 values beyond
// 2^53 are rounded. It returns nil for an unsupported dtype and converts only
// the whole elements present in Data.
func (t Tensor) Float64s() []float64 {
	size := t.Type.DType.Size()
	if _, ok := dtypeToName[t.Type.DType]; !ok || size == 0 {
		return nil
	}
	n := len(t.Data) / size
	out := make([]float64, n)
	for i := range out {
		b := t.Data[i*size:]
		switch t.Type.DType {
		case ir.F32:
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		case ir.F64:
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		case ir.I32:
			out[i] = float64(int32(binary.LittleEndian.Uint32(b)))
		case ir.I64:
			out[i] = float64(int64(binary.LittleEndian.Uint64(b)))
		case ir.Bool:
			if b[0] != 0 {
				out[i] = 1
			}
		}
	}
	return out
}
