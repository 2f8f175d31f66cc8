package onnx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// tensor is a constant known at import: an initializer, a Constant node or
// the result of folded shape arithmetic. Floats are held in f, integers and
// bools in i (0 or 1).
//
// A float initializer stored as raw bytes (raw_data or an external file)
// keeps them in raw and decodes them into f only when read as a constant,
// so a param's values are never held twice: Model.Params shares raw.
type tensor struct {
	dt    ir.DType
	shape []int
	f     []float64
	i     []int64
	raw   []byte
}

func (t *tensor) n() int {
	if t.raw != nil && t.f == nil && t.i == nil {
		return len(t.raw) / t.dt.Size()
	}
	if t.dt.IsFloat() {
		return len(t.f)
	}
	return len(t.i)
}

// load decodes raw into f or i, once.
func (t *tensor) load() {
	if t.raw != nil && t.f == nil && t.i == nil {
		t.fromLE(t.raw, t.n())
	}
}

// floats returns the elements as float64 (integers above 2^53 round).
func (t *tensor) floats() []float64 {
	t.load()
	if t.dt.IsFloat() {
		return t.f
	}
	out := make([]float64, len(t.i))
	for k, x := range t.i {
		out[k] = float64(x)
	}
	return out
}

// ints returns the elements as int64 (floats truncate).
func (t *tensor) ints() []int64 {
	t.load()
	if !t.dt.IsFloat() {
		return t.i
	}
	out := make([]int64, len(t.f))
	for k, x := range t.f {
		out[k] = int64(x)
	}
	return out
}

// bytes returns the elements little-endian in t's dtype.
func (t *tensor) bytes() []byte {
	if t.raw != nil {
		return t.raw
	}
	sz := t.dt.Size()
	out := make([]byte, sz*t.n())
	for k := 0; k < t.n(); k++ {
		b := out[k*sz:]
		switch t.dt {
		case ir.F32:
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(t.f[k])))
		case ir.F64:
			binary.LittleEndian.PutUint64(b, math.Float64bits(t.f[k]))
		case ir.I32:
			binary.LittleEndian.PutUint32(b, uint32(int32(t.i[k])))
		case ir.I64:
			binary.LittleEndian.PutUint64(b, uint64(t.i[k]))
		case ir.Bool:
			b[0] = byte(t.i[k])
		}
	}
	return out
}

// dtypeCodes are ONNX's TensorProto.DataType codes of kiln's dtypes, the one
// table that reading (onnxDType) and writing (dtypeCode) go by.
var dtypeCodes = []struct {
	dt   ir.DType
	code onnxpb.TensorProto_DataType
}{
	{ir.F32, onnxpb.TensorProto_FLOAT},
	{ir.F64, onnxpb.TensorProto_DOUBLE},
	{ir.I32, onnxpb.TensorProto_INT32},
	{ir.I64, onnxpb.TensorProto_INT64},
	{ir.Bool, onnxpb.TensorProto_BOOL},
}

// onnxDType maps ONNX's TensorProto.DataType to kiln's dtypes.
func onnxDType(code int32) (ir.DType, error) {
	for _, c := range dtypeCodes {
		if int32(c.code) == code {
			return c.dt, nil
		}
	}
	name := onnxpb.TensorProto_DataType(code).String()
	if _, err := strconv.Atoi(name); err == nil {
		name = "code " + name
	}
	return ir.InvalidDType, fmt.Errorf("dtype %s is not supported (kiln reads FLOAT, DOUBLE, INT32, INT64 and BOOL)", name)
}

// dtypeCode is the ONNX code of dt, one of kiln's dtypes.
func dtypeCode(dt ir.DType) onnxpb.TensorProto_DataType {
	for _, c := range dtypeCodes {
		if c.dt == dt {
			return c.code
		}
	}
	panic(fmt.Sprintf("onnx: no ONNX code for dtype %s", dt))
}

// checkedType returns the kiln type of dims and dtype code, within ir's limits.
func checkedType(code int32, dims []int64) (ir.Type, error) {
	dt, err := onnxDType(code)
	if err != nil {
		return ir.Type{}, err
	}
	if len(dims) > ir.MaxRank {
		return ir.Type{}, fmt.Errorf("rank %d is above the limit %d (ir.MaxRank)", len(dims), ir.MaxRank)
	}
	shape := make(ir.Shape, len(dims))
	for k, d := range dims {
		if d < 0 || d > ir.MaxTensorBytes {
			return ir.Type{}, fmt.Errorf("dim %d is %d; expected a size in [0, %d]", k, d, int64(ir.MaxTensorBytes))
		}
		shape[k] = int(d)
	}
	t := ir.Type{DType: dt, Shape: shape}
	if _, err := t.BytesChecked(); err != nil {
		return ir.Type{}, err
	}
	return t, nil
}

// readTensor decodes a TensorProto from its typed fields, raw_data or an
// external data file in im.dir. With lazy, raw float data stays raw until
// it is read as a constant (see tensor).
func (im *importer) readTensor(tp *onnxpb.TensorProto, lazy bool) (*tensor, error) {
	if tp == nil {
		return nil, errors.New("a tensor attribute holds no tensor")
	}
	if err := ir.CheckName("tensor", tp.GetName()); err != nil {
		return nil, err
	}
	if tp.Segment != nil {
		return nil, errors.New("segmented tensors are not supported")
	}
	typ, err := checkedType(tp.GetDataType(), tp.Dims)
	if err != nil {
		return nil, err
	}
	n := typ.Shape.NumElements()
	t := &tensor{dt: typ.DType, shape: []int(typ.Shape)}
	raw := tp.RawData
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		if raw, err = im.external(tp, typ.Bytes()); err != nil {
			return nil, err
		}
	}
	if raw != nil || tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		if len(raw) != typ.Bytes() {
			return nil, fmt.Errorf("expected %d bytes of data for %s, found %d", typ.Bytes(), typ, len(raw))
		}
		if lazy && typ.DType.IsFloat() {
			if raw == nil {
				raw = []byte{}
			}
			t.raw = raw
			return t, nil
		}
		return t.fromLE(raw, n), nil
	}
	count := func(found int) error {
		if found != n {
			return fmt.Errorf("expected %d elements for %s, found %d", n, typ, found)
		}
		return nil
	}
	switch typ.DType {
	case ir.F32:
		if err := count(len(tp.FloatData)); err != nil {
			return nil, err
		}
		t.f = make([]float64, n)
		for k, x := range tp.FloatData {
			t.f[k] = float64(x)
		}
	case ir.F64:
		if err := count(len(tp.DoubleData)); err != nil {
			return nil, err
		}
		t.f = append([]float64(nil), tp.DoubleData...)
	case ir.I32, ir.Bool:
		if err := count(len(tp.Int32Data)); err != nil {
			return nil, err
		}
		t.i = make([]int64, n)
		for k, x := range tp.Int32Data {
			if typ.DType == ir.Bool && x != 0 {
				x = 1
			}
			t.i[k] = int64(x)
		}
	case ir.I64:
		if err := count(len(tp.Int64Data)); err != nil {
			return nil, err
		}
		t.i = append([]int64(nil), tp.Int64Data...)
	}
	return t, nil
}

func (t *tensor) fromLE(raw []byte, n int) *tensor {
	sz := t.dt.Size()
	if t.dt.IsFloat() {
		t.f = make([]float64, n)
	} else {
		t.i = make([]int64, n)
	}
	for k := 0; k < n; k++ {
		b := raw[k*sz:]
		switch t.dt {
		case ir.F32:
			t.f[k] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		case ir.F64:
			t.f[k] = math.Float64frombits(binary.LittleEndian.Uint64(b))
		case ir.I32:
			t.i[k] = int64(int32(binary.LittleEndian.Uint32(b)))
		case ir.I64:
			t.i[k] = int64(binary.LittleEndian.Uint64(b))
		case ir.Bool:
			if b[0] != 0 {
				t.i[k] = 1
			}
		}
	}
	return t
}

// external reads want bytes of an initializer stored in a file beside the
// model (external_data: location, offset, length). A location that leaves
// the model's folder is refused.
func (im *importer) external(tp *onnxpb.TensorProto, want int) ([]byte, error) {
	var loc string
	var off, length int64 = 0, -1
	for _, kv := range tp.ExternalData {
		switch kv.GetKey() {
		case "location":
			loc = kv.GetValue()
		case "offset", "length":
			x, err := strconv.ParseInt(kv.GetValue(), 10, 64)
			if err != nil || x < 0 {
				return nil, fmt.Errorf("external data %s %q is not a byte count", kv.GetKey(), ir.Excerpt(kv.GetValue()))
			}
			if kv.GetKey() == "offset" {
				off = x
			} else {
				length = x
			}
		}
	}
	if loc == "" {
		return nil, errors.New("external data without a location")
	}
	if im.dir == "" {
		return nil, fmt.Errorf("external data %q: the model was not read from a file", ir.Excerpt(loc))
	}
	if !filepath.IsLocal(filepath.FromSlash(loc)) {
		return nil, fmt.Errorf("external data location %q leaves the model's folder", ir.Excerpt(loc))
	}
	if length >= 0 && length != int64(want) {
		return nil, fmt.Errorf("external data %q: length %d, but the tensor needs %d bytes", ir.Excerpt(loc), length, want)
	}
	path := filepath.Join(im.dir, filepath.FromSlash(loc))
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("external data: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off > fi.Size() || int64(want) > fi.Size()-off {
		return nil, fmt.Errorf("external data %s: %d bytes at offset %d run past its end (%d bytes)", path, want, off, fi.Size())
	}
	buf := make([]byte, want)
	if _, err := f.ReadAt(buf, off); err != nil && !(errors.Is(err, io.EOF) && want == 0) {
		return nil, fmt.Errorf("external data %s: %v", path, err)
	}
	return buf, nil
}

// valueType returns the static kiln type of a graph input; given, when
// not nil, is its shape from Options.Shapes.
// staticShape reports whether vi states its shape in full, every dim a
// number.
func staticShape(vi *onnxpb.ValueInfoProto) bool {
	shape := vi.GetType().GetTensorType().GetShape()
	if shape == nil {
		return false
	}
	for _, d := range shape.Dim {
		if d.GetDimParam() != "" || d.Value == nil {
			return false
		}
	}
	return true
}

func valueType(vi *onnxpb.ValueInfoProto, given []int) (ir.Type, error) {
	tt := vi.GetType().GetTensorType()
	if tt == nil {
		return ir.Type{}, errors.New("only tensor inputs are supported")
	}
	if tt.Shape == nil && given == nil {
		return ir.Type{}, errors.New("the input has no shape; give it one")
	}
	var dims []int64
	if given != nil {
		if tt.Shape != nil && len(tt.Shape.Dim) != len(given) {
			return ir.Type{}, fmt.Errorf("the shape given has rank %d, the model's has rank %d", len(given), len(tt.Shape.Dim))
		}
		for _, d := range given {
			dims = append(dims, int64(d))
		}
	}
	if tt.Shape != nil {
		for k, d := range tt.Shape.Dim {
			symbolic := d.GetDimParam() != "" || d.Value == nil
			switch {
			case given == nil && symbolic:
				return ir.Type{}, fmt.Errorf("dim %d is symbolic (%q); give the input a static shape", k, ir.Excerpt(d.GetDimParam()))
			case given == nil:
				dims = append(dims, d.GetDimValue())
			case !symbolic && d.GetDimValue() != dims[k]:
				return ir.Type{}, fmt.Errorf("the shape given has %d at dim %d, the model states %d", dims[k], k, d.GetDimValue())
			}
		}
	}
	return checkedType(tt.GetElemType(), dims)
}
