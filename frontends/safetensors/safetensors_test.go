package safetensors

import (
	"bytes"
	"encoding/binary"
	"github.com/kilnml/kiln/internal/golden"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// goldenBytes returns the contents of testdata/golden.safetensors, built by
// hand from the format description rather than by Encode:
//
//   - bytes 0..7: the header length, 384 = 0x180, as a little-endian u64;
//   - bytes 8..391: the JSON header below (377 bytes) followed by 7 spaces of
//     padding, so that the data starts at a multiple of 8;
//   - bytes 392..434: the 43 data bytes, each tensor's little-endian values at
//     its data_offsets, in name order:
//     bias  F32 [2]    0.5 = 0x3F000000, -1.25 = 0xBFA00000      [0,8)
//     count I64 []     7                                        [8,16)
//     mask  BOOL [3]   true, false, true                        [16,19)
//     scale F64 [1]    2.5 = 0x4004000000000000                 [19,27)
//     w     I32 [2,2]  1, -2, 3, -4 (two's complement)          [27,43)
//     z     F32 [0]    no bytes                                 [43,43)
func goldenBytes() []byte {
	const header = `{"__metadata__":{"format":"kiln"},` +
		`"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"count":{"dtype":"I64","shape":[],"data_offsets":[8,16]},` +
		`"mask":{"dtype":"BOOL","shape":[3],"data_offsets":[16,19]},` +
		`"scale":{"dtype":"F64","shape":[1],"data_offsets":[19,27]},` +
		`"w":{"dtype":"I32","shape":[2,2],"data_offsets":[27,43]},` +
		`"z":{"dtype":"F32","shape":[0],"data_offsets":[43,43]}}` +
		"       " // 7 spaces: 377 + 7 = 384
	var b []byte
	b = append(b, 0x80, 0x01, 0, 0, 0, 0, 0, 0) // 384
	b = append(b, header...)
	b = append(b,
		0x00, 0x00, 0x00, 0x3F, 0x00, 0x00, 0xA0, 0xBF, // bias
		0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // count
		0x01, 0x00, 0x01, // mask
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x40, // scale
		0x01, 0x00, 0x00, 0x00, 0xFE, 0xFF, 0xFF, 0xFF, // w[0,0], w[0,1]
		0x03, 0x00, 0x00, 0x00, 0xFC, 0xFF, 0xFF, 0xFF, // w[1,0], w[1,1]
	)
	return b
}

func TestGolden(t *testing.T) {
	want := goldenBytes()
	if len(want) != 8+384+43 {
		t.Fatalf("hand-built golden file has %d bytes, want %d", len(want), 8+384+43)
	}
	path := filepath.Join("testdata", "golden.safetensors")
	if golden.Update() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the hand-built bytes; run go test -update", path)
	}

	tensors, meta, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta) != 1 || meta["format"] != "kiln" {
		t.Errorf("metadata = %v, want map[format:kiln]", meta)
	}
	type expect struct {
		name string
		typ  ir.Type
		vals []float64
	}
	wantT := []expect{
		{"bias", ir.TensorOf(ir.F32, 2), []float64{0.5, -1.25}},
		{"count", ir.TensorOf(ir.I64), []float64{7}},
		{"mask", ir.TensorOf(ir.Bool, 3), []float64{1, 0, 1}},
		{"scale", ir.TensorOf(ir.F64, 1), []float64{2.5}},
		{"w", ir.TensorOf(ir.I32, 2, 2), []float64{1, -2, 3, -4}},
		{"z", ir.TensorOf(ir.F32, 0), []float64{}},
	}
	if len(tensors) != len(wantT) {
		t.Fatalf("got %d tensors, want %d", len(tensors), len(wantT))
	}
	for i, w := range wantT {
		g := tensors[i]
		if g.Name != w.name || !g.Type.Equal(w.typ) {
			t.Errorf("tensor %d = %s %v, want %s %v", i, g.Name, g.Type, w.name, w.typ)
		}
		if v := g.Float64s(); !slices.Equal(v, w.vals) {
			t.Errorf("%s values = %v, want %v", w.name, v, w.vals)
		}
	}

	// Encode reproduces the reference layout byte for byte.
	enc, err := Encode(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, want) {
		t.Errorf("Encode of the golden tensors differs:\n got %q\nwant %q", enc, want)
	}
}

func mustFrom(t *testing.T, name string, dt ir.DType, shape ir.Shape, v []float64) Tensor {
	t.Helper()
	x, err := FromFloat64(name, dt, shape, v)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestRoundTripAllDTypes(t *testing.T) {
	shapes := []ir.Shape{{}, {0}, {3}, {2, 3}, {2, 0, 4}, {1, 1, 1, 2}}
	values := map[ir.DType][]float64{
		ir.F32:  {0, -1.5, 3.25, float64(float32(0.1)), math.Inf(1), -65504},
		ir.F64:  {0, -1.5, 0.1, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(-1)},
		ir.I32:  {0, -1, math.MaxInt32, math.MinInt32, 42, 7},
		ir.I64:  {0, -1, 1 << 53, -(1 << 62), 42, 7},
		ir.Bool: {0, 1, 1, 0, 1, 0},
	}
	var all []Tensor
	for _, dt := range []ir.DType{ir.F32, ir.F64, ir.I32, ir.I64, ir.Bool} {
		for i, sh := range shapes {
			n := sh.NumElements()
			name := dt.String() + "_" + string(rune('a'+i))
			all = append(all, mustFrom(t, name, dt, sh, values[dt][:n]))
		}
	}
	meta := map[string]string{"format": "pt", "note": `<&> "quoted" ünï`}
	data, err := Encode(all, meta)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 8 || binary.LittleEndian.Uint64(data)%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", binary.LittleEndian.Uint64(data))
	}
	got, gotMeta, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(gotMeta) != len(meta) || gotMeta["note"] != meta["note"] || gotMeta["format"] != "pt" {
		t.Errorf("metadata = %v, want %v", gotMeta, meta)
	}
	want := slices.Clone(all)
	slices.SortFunc(want, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	if len(got) != len(want) {
		t.Fatalf("got %d tensors, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || !g.Type.Equal(w.Type) || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("tensor %d: got %s %v %x, want %s %v %x", i, g.Name, g.Type, g.Data, w.Name, w.Type, w.Data)
		}
		if g.Type.Shape == nil {
			t.Errorf("%s: nil shape, want non-nil", g.Name)
		}
		if len(g.Data) != g.Type.Bytes() {
			t.Errorf("%s: %d bytes, want %d", g.Name, len(g.Data), g.Type.Bytes())
		}
		n := w.Type.Shape.NumElements()
		if v := g.Float64s(); !slices.Equal(v, values[w.Type.DType][:n]) {
			t.Errorf("%s: values %v, want %v", g.Name, v, values[w.Type.DType][:n])
		}
	}
	// Decode copies: changing the file buffer leaves the tensors alone.
	before := bytes.Clone(got[len(got)-1].Data)
	for i := range data {
		data[i] = 0xAA
	}
	if !bytes.Equal(got[len(got)-1].Data, before) {
		t.Error("Decode's tensors alias the input buffer")
	}
}

func TestEncodeDeterministic(t *testing.T) {
	a := mustFrom(t, "a", ir.F32, ir.Shape{2}, []float64{1, 2})
	b := mustFrom(t, "b", ir.I64, ir.Shape{}, []float64{3})
	c := mustFrom(t, "c", ir.Bool, ir.Shape{1}, []float64{1})
	meta := map[string]string{"z": "1", "a": "2", "m": "3"}
	first, err := Encode([]Tensor{c, a, b}, meta)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := Encode([]Tensor{b, c, a}, map[string]string{"m": "3", "z": "1", "a": "2"})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatal("Encode output depends on argument order")
		}
	}
	n := binary.LittleEndian.Uint64(first)
	header := string(first[8 : 8+n])
	wantHeader := `{"__metadata__":{"a":"2","m":"3","z":"1"},` +
		`"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"b":{"dtype":"I64","shape":[],"data_offsets":[8,16]},` +
		`"c":{"dtype":"BOOL","shape":[1],"data_offsets":[16,17]}}`
	if strings.TrimRight(header, " ") != wantHeader {
		t.Errorf("header = %s\nwant     %s", header, wantHeader)
	}
	// No metadata: the key is omitted.
	noMeta, err := Encode([]Tensor{a}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(noMeta, []byte(metadataKey)) {
		t.Errorf("empty metadata was written: %q", noMeta)
	}
	_, m, err := Decode(noMeta)
	if err != nil || m != nil {
		t.Errorf("Decode without metadata = %v, %v; want nil, nil", m, err)
	}
	empty, err := Encode(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\x08\x00\x00\x00\x00\x00\x00\x00{}      "; string(empty) != want {
		t.Errorf("Encode(nil, nil) = %q, want %q", empty, want)
	}
}

// file builds a safetensors file from a header and data, without padding.
func file(header string, data ...byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestDecodeErrors(t *testing.T) {
	eight := make([]byte, 8)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "safetensors: truncated file: 0 bytes, need at least 8 for the header length"},
		{"short", []byte{1, 2, 3}, "truncated file: 3 bytes"},
		{"header longer than file", file(`{}`)[:9], "header length 2 is larger than the file: only 1 bytes follow the length"},
		{"huge header length", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'}, "header length 18446744073709551615 is larger than the file"},
		{"empty header", file(``), "invalid JSON header: does not start with '{'"},
		{"array header", file(`[1,2]`), "invalid JSON header: does not start with '{'"},
		{"truncated JSON", file(`{"a":{"dtype":"F32"`), "invalid JSON header"},
		{"bad JSON", file(`{"a" 1}`), "invalid JSON header"},
		{"trailing JSON", file(`{} {}`), "invalid JSON header: unexpected data after the closing '}'"},
		{"not UTF-8", file("{\"\xff\":1}"), "invalid JSON header: not valid UTF-8"},
		{"duplicate key", file(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, 0, 0, 0, 0),
			`invalid JSON header: key "a" appears more than once`},
		{"unsupported dtype", file(`{"w":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, 0, 0),
			`safetensors: tensor "w": dtype F16 is not supported (kiln reads F32, F64, I32, I64, BOOL)`},
		{"unknown dtype", file(`{"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`, 0, 0, 0, 0),
			`tensor "w": dtype f32 is not supported (kiln reads F32, F64, I32, I64, BOOL)`},
		{"dtype not string", file(`{"w":{"dtype":3,"shape":[1],"data_offsets":[0,4]}}`, 0, 0, 0, 0),
			`tensor "w": dtype must be a string, found a JSON number`},
		{"entry not object", file(`{"w":5}`), `tensor "w": header entry must be an object`},
		{"missing dtype", file(`{"w":{"shape":[1],"data_offsets":[0,4]}}`, 0, 0, 0, 0), `tensor "w": missing dtype`},
		{"missing shape", file(`{"w":{"dtype":"F32","data_offsets":[0,4]}}`, 0, 0, 0, 0), `tensor "w": missing shape`},
		{"missing offsets", file(`{"w":{"dtype":"F32","shape":[1]}}`, 0, 0, 0, 0), `tensor "w": missing data_offsets`},
		{"negative dim", file(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`), `tensor "w": negative dimension -1 in shape [-1]`},
		{"fractional dim", file(`{"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,10]}}`, eight...), `tensor "w": shape must be an array of non-negative integers`},
		{"huge shape", file(`{"w":{"dtype":"F32","shape":[65536,65536,65536,65536],"data_offsets":[0,8]}}`, eight...),
			`tensor "w": shape [65536,65536,65536,65536] has 1.84e+19 elements; the limit is 2^40 (ir.MaxTensorBytes)`},
		{"over the tensor limit", file(`{"w":{"dtype":"F64","shape":[137438953473],"data_offsets":[0,8]}}`, eight...),
			`tensor "w": f64[137438953473] is too large: 1099511627784 bytes; the limit is 1 TiB`},
		{"zero dim with a dim over the limit", file(`{"w":{"dtype":"F32","shape":[0,4611686018427387904],"data_offsets":[0,0]}}`),
			`tensor "w": shape [0,4611686018427387904] has a dimension of 4611686018427387904; the limit is 2^40`},
		{"gap between tensors", file(`{"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"BOOL","shape":[1],"data_offsets":[3,4]}}`, 1, 9, 9, 0),
			`tensor "b": data_offsets [3,4] leave bytes [1,3] unused after tensor "a" at [0,1]; the format forbids gaps`},
		{"gap at the start", file(`{"a":{"dtype":"BOOL","shape":[1],"data_offsets":[2,3]}}`, 1, 9, 9),
			`tensor "a": data_offsets [2,3] leave bytes [0,2] unused at the start of the data section; the format forbids gaps`},
		{"trailing bytes", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, eight...),
			`4 bytes after the last tensor ("a" ends at 4 of the 8-byte data section); the format forbids trailing bytes`},
		{"data but no tensors", file(`{}`, 1, 2),
			`2 bytes of data after a header that lists no tensors; the format forbids trailing bytes`},
		{"zero-size inside another", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[0],"data_offsets":[2,2]}}`, 0, 0, 0, 0),
			`tensor "b": data_offsets [2,2] overlap tensor "a" at [0,4]`},
		{"long name", file(`{"`+strings.Repeat("n", 1000)+`":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}}`, eight...),
			`tensor "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...": data_offsets [0,8] hold 8 bytes, but F32[1] needs 4`},
		{"offsets too small", file(`{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,8]}}`, eight...),
			`tensor "w": data_offsets [0,8] hold 8 bytes, but F32[2,3] needs 24`},
		{"offsets too large", file(`{"w":{"dtype":"BOOL","shape":[2],"data_offsets":[0,8]}}`, eight...),
			`tensor "w": data_offsets [0,8] hold 8 bytes, but BOOL[2] needs 2`},
		{"offsets past end", file(`{"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}`, eight...),
			`tensor "w": data_offsets [0,16] run past the end of the 8-byte data section`},
		{"offsets reversed", file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}`, eight...), `tensor "w": invalid data_offsets [8,4]`},
		{"offsets negative", file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, eight...), `tensor "w": invalid data_offsets [-4,0]`},
		{"offsets count", file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`, eight...), `tensor "w": data_offsets must be [begin, end], found 1 numbers`},
		{"offsets not ints", file(`{"w":{"dtype":"F32","shape":[1],"data_offsets":"0,4"}}`, eight...), `tensor "w": data_offsets must be an array of two non-negative integers, found a JSON string`},
		{"overlap", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1],"data_offsets":[2,6]}}`, eight...),
			`tensor "b": data_offsets [2,6] overlap tensor "a" at [0,4]`},
		{"same range", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}`, eight...),
			`overlap tensor`},
		{"metadata not object", file(`{"__metadata__":[1]}`), "invalid __metadata__: must be an object of strings"},
		{"metadata value not string", file(`{"__metadata__":{"k":1}}`), `invalid __metadata__: value of "k" is not a string`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, m, err := Decode(tc.data)
			if err == nil {
				t.Fatalf("Decode succeeded: %v %v", ts, m)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error = %q, want it to contain %q", msg, tc.want)
			}
			if !strings.HasPrefix(msg, "safetensors: ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q is not one prefixed line", msg)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		n    int
	}{
		{"empty header object", file(`{}`), 0},
		{"whitespace around header", file(" \n{}  "), 0},
		{"null metadata", file(`{"__metadata__":null}`), 0},
		{"unknown entry fields ignored", file(`{"w":{"dtype":"F32","shape":[],"data_offsets":[0,4],"extra":1}}`, 0, 0, 0, 0), 1},
		{"zero-size at the end", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}}`, 0, 0, 0, 0), 2},
		{"zero-size at the start", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}`, 0, 0, 0, 0), 2},
		{"tensors out of order", file(`{"a":{"dtype":"BOOL","shape":[1],"data_offsets":[1,2]},"b":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}}`, 1, 0), 2},
		{"zero dim with huge dim", file(`{"a":{"dtype":"F64","shape":[0,2147483647],"data_offsets":[0,0]}}`), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, _, err := Decode(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != tc.n {
				t.Errorf("got %d tensors, want %d", len(ts), tc.n)
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	ok := mustFrom(t, "w", ir.F32, ir.Shape{2}, []float64{1, 2})
	tests := []struct {
		name    string
		tensors []Tensor
		meta    map[string]string
		want    string
	}{
		{"duplicate", []Tensor{ok, ok}, nil, `safetensors: tensor "w": duplicate name`},
		{"short data", []Tensor{{Name: "w", Type: ir.TensorOf(ir.F32, 2, 3), Data: make([]byte, 8)}}, nil,
			`tensor "w": 8 bytes of data, but f32[2,3] needs 24`},
		{"long data", []Tensor{{Name: "w", Type: ir.TensorOf(ir.F32, 1), Data: make([]byte, 8)}}, nil,
			`tensor "w": 8 bytes of data, but f32[1] needs 4`},
		{"nil data", []Tensor{{Name: "w", Type: ir.TensorOf(ir.I64)}}, nil, `tensor "w": 0 bytes of data, but i64[] needs`},
		{"negative dim", []Tensor{{Name: "w", Type: ir.Type{DType: ir.F32, Shape: ir.Shape{2, -1}}}}, nil,
			`tensor "w": negative dimension -1 in shape [2,-1]`},
		{"invalid dtype", []Tensor{{Name: "w", Type: ir.Type{DType: ir.InvalidDType, Shape: ir.Shape{}}}}, nil,
			`tensor "w": dtype invalid is not supported (kiln writes F32, F64, I32, I64, BOOL)`},
		{"reserved name", []Tensor{{Name: "__metadata__", Type: ir.TensorOf(ir.Bool), Data: []byte{1}}}, nil,
			`tensor "__metadata__": the name is reserved for metadata`},
		{"bad UTF-8 name", []Tensor{{Name: "\xff", Type: ir.TensorOf(ir.Bool), Data: []byte{1}}}, nil, `name is not valid UTF-8`},
		{"bad UTF-8 metadata", nil, map[string]string{"k": "\xfe"}, `__metadata__ key "k": key and value must be valid UTF-8`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Encode(tc.tensors, tc.meta)
			if err == nil {
				t.Fatal("Encode succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestFromFloat64Errors(t *testing.T) {
	tests := []struct {
		name  string
		dt    ir.DType
		shape ir.Shape
		v     []float64
		want  string
	}{
		{"count", ir.F32, ir.Shape{2, 2}, []float64{1, 2, 3}, `tensor "x": 3 values for shape [2,2], which has 4 elements`},
		{"negative dim", ir.F32, ir.Shape{-2}, nil, `tensor "x": negative dimension -2`},
		{"count wraps", ir.F32, ir.Shape{1 << 62, 4}, nil, `tensor "x": shape [4611686018427387904,4] has a dimension of 4611686018427387904`},
		{"invalid dtype", ir.DType(99), ir.Shape{}, []float64{1}, `tensor "x": dtype dtype(99) is not supported`},
		{"i32 fraction", ir.I32, ir.Shape{2}, []float64{1, 1.5}, `tensor "x": element 1 = 1.5 cannot be represented as i32`},
		{"i32 range", ir.I32, ir.Shape{1}, []float64{1 << 31}, `cannot be represented as i32`},
		{"i32 NaN", ir.I32, ir.Shape{1}, []float64{math.NaN()}, `cannot be represented as i32`},
		{"i64 range", ir.I64, ir.Shape{1}, []float64{1 << 63}, `cannot be represented as i64`},
		{"i64 inf", ir.I64, ir.Shape{1}, []float64{math.Inf(-1)}, `cannot be represented as i64`},
		{"bool 2", ir.Bool, ir.Shape{1}, []float64{2}, `element 0 = 2 cannot be represented as bool`},
		{"f32 overflow", ir.F32, ir.Shape{1}, []float64{1e39}, `cannot be represented as f32`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromFloat64("x", tc.dt, tc.shape, tc.v)
			if err == nil {
				t.Fatal("FromFloat64 succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestFromFloat64(t *testing.T) {
	shape := ir.Shape{2}
	x := mustFrom(t, "x", ir.I64, shape, []float64{-(1 << 63), 5})
	shape[0] = 7 // the tensor keeps its own copy
	if !x.Type.Equal(ir.TensorOf(ir.I64, 2)) {
		t.Errorf("type = %v, want i64[2]", x.Type)
	}
	if got := int64(binary.LittleEndian.Uint64(x.Data)); got != math.MinInt64 {
		t.Errorf("first element = %d, want MinInt64", got)
	}
	s := mustFrom(t, "s", ir.F32, nil, []float64{math.NaN()})
	if s.Type.Shape == nil || len(s.Type.Shape) != 0 || len(s.Data) != 4 {
		t.Errorf("scalar = %v %x", s.Type, s.Data)
	}
	if v := s.Float64s(); len(v) != 1 || !math.IsNaN(v[0]) {
		t.Errorf("NaN round trip = %v", v)
	}
	if v := (Tensor{Type: ir.TensorOf(ir.Bool, 2), Data: []byte{0, 7}}).Float64s(); !slices.Equal(v, []float64{0, 1}) {
		t.Errorf("bool Float64s = %v, want [0 1]", v)
	}
	if v := (Tensor{Type: ir.Type{DType: ir.InvalidDType}}).Float64s(); v != nil {
		t.Errorf("invalid dtype Float64s = %v, want nil", v)
	}
}

func TestReadWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	w := mustFrom(t, "w", ir.F64, ir.Shape{2}, []float64{1, 2})
	if err := WriteFile(path, []Tensor{w}, map[string]string{"step": "1"}); err != nil {
		t.Fatal(err)
	}
	// Overwrite in place.
	w2 := mustFrom(t, "w", ir.F64, ir.Shape{2}, []float64{3, 4})
	if err := WriteFile(path, []Tensor{w2}, map[string]string{"step": "2"}); err != nil {
		t.Fatal(err)
	}
	got, meta, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if meta["step"] != "2" || len(got) != 1 || !slices.Equal(got[0].Float64s(), []float64{3, 4}) {
		t.Errorf("ReadFile = %v %v", got, meta)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, %v; want 0644", fi.Mode(), err)
	}

	// A failed write leaves the old file intact and no temporary files.
	bad := Tensor{Name: "w", Type: ir.TensorOf(ir.F32, 3), Data: []byte{1}}
	err = WriteFile(path, []Tensor{bad}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("WriteFile error = %v, want it prefixed with %s", err, path)
	}
	if _, meta, err := ReadFile(path); err != nil || meta["step"] != "2" {
		t.Errorf("old file damaged: %v %v", meta, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only model.safetensors", names)
	}

	// Errors name the file.
	missingDir := filepath.Join(dir, "nope", "x.safetensors")
	if err := WriteFile(missingDir, nil, nil); err == nil || !strings.HasPrefix(err.Error(), missingDir+": ") {
		t.Errorf("WriteFile into a missing directory: %v", err)
	}
	if _, _, err := ReadFile(missingDir); err == nil || !strings.Contains(err.Error(), missingDir) {
		t.Errorf("ReadFile of a missing file: %v", err)
	}
	corrupt := filepath.Join(dir, "corrupt.safetensors")
	if err := os.WriteFile(corrupt, file(`{"w":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}}`, 0, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = ReadFile(corrupt)
	if want := corrupt + `: tensor "w": dtype BF16 is not supported (kiln reads F32, F64, I32, I64, BOOL)`; err == nil || err.Error() != want {
		t.Errorf("ReadFile error = %v\nwant %s", err, want)
	}

	// A relative path in the current directory works too.
	t.Chdir(dir)
	if err := WriteFile("rel.safetensors", []Tensor{w}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadFile("rel.safetensors"); err != nil {
		t.Fatal(err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(goldenBytes())
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(file(`{}`))
	f.Add(file(`{"__metadata__":{"a":"b"}}`))
	f.Add(file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1],"data_offsets":[2,6]}}`, make([]byte, 8)...))
	f.Add(file(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, make([]byte, 8)...))
	f.Add(file(`{"w":{"dtype":"BOOL","shape":[0,3],"data_offsets":[0,0]},"v":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}`, make([]byte, 8)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		tensors, meta, err := Decode(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		for i, x := range tensors {
			if len(x.Data) != x.Type.Bytes() {
				t.Fatalf("%s: %d bytes for %v", x.Name, len(x.Data), x.Type)
			}
			if i > 0 && tensors[i-1].Name >= x.Name {
				t.Fatalf("tensors not sorted: %q before %q", tensors[i-1].Name, x.Name)
			}
			if v := x.Float64s(); len(v) != x.Type.Shape.NumElements() {
				t.Fatalf("%s: %d values for %v", x.Name, len(v), x.Type)
			}
		}
		// Whatever decodes re-encodes, and decodes to the same tensors.
		again, err := Encode(tensors, meta)
		if err != nil {
			t.Fatalf("re-Encode: %v", err)
		}
		back, meta2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-Decode: %v", err)
		}
		if len(back) != len(tensors) || len(meta2) != len(meta) {
			t.Fatalf("round trip changed counts")
		}
		for i := range back {
			if back[i].Name != tensors[i].Name || !back[i].Type.Equal(tensors[i].Type) || !bytes.Equal(back[i].Data, tensors[i].Data) {
				t.Fatalf("round trip changed tensor %q", tensors[i].Name)
			}
		}
		for k, v := range meta {
			if meta2[k] != v {
				t.Fatalf("round trip changed metadata %q", k)
			}
		}
	})
}
