package onnx_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// TestWriteTrained writes the MLP fixture with new values for one param
// and checks that a re-import reads them, and the other params unchanged,
// bit for bit.
func TestWriteTrained(t *testing.T) {
	path := fixture("mlp.onnx")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := importFixture(t, "mlp")
	p := m.Params[1] // fc1.bias
	data := make([]byte, len(p.Data))
	for i := range data {
		data[i] = byte(i * 7)
	}
	var b bytes.Buffer
	if err := m.WriteTrained(src, []safetensors.Tensor{{Name: p.Name, Type: p.Type, Data: data}}, &b); err != nil {
		t.Fatal(err)
	}
	m2, err := onnx.Decode(b.Bytes(), "")
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range m2.Params {
		want := m.Params[i].Data
		if q.Name == p.Name {
			want = data
		}
		if q.Name != m.Params[i].Name || !bytes.Equal(q.Data, want) {
			t.Errorf("param %d %q: not the values written", i, q.Name)
		}
	}
}

// TestWriteTrainedErrors checks the errors of tensors that do not fit the
// model's initializers.
func TestWriteTrainedErrors(t *testing.T) {
	src, err := os.ReadFile(fixture("mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	m := importFixture(t, "mlp")
	f32 := func(shape ...int) ir.Type { return ir.Type{DType: ir.F32, Shape: shape} }
	for _, tc := range []struct {
		ts   safetensors.Tensor
		want string
	}{
		{safetensors.Tensor{Name: "fc3.bias", Type: f32(10), Data: make([]byte, 40)}, `tensor "fc3.bias" is not an initializer of the model`},
		{safetensors.Tensor{Name: "fc2.bias", Type: f32(11), Data: make([]byte, 44)}, `tensor "fc2.bias": the initializer is f32[10], the tensor f32[11]`},
		{safetensors.Tensor{Name: "fc2.bias", Type: f32(10), Data: make([]byte, 8)}, `tensor "fc2.bias": 8 bytes of data, f32[10] takes 40`},
		{safetensors.Tensor{Name: "fc2.bias", Type: ir.Type{DType: ir.F64, Shape: ir.Shape{10}}, Data: make([]byte, 80)}, `tensor "fc2.bias": the initializer is f32[10], the tensor f64[10]`},
	} {
		err := m.WriteTrained(src, []safetensors.Tensor{tc.ts}, new(bytes.Buffer))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %s", tc.ts.Name, err, tc.want)
		}
	}
	if err := m.WriteTrained(src[:len(src)/2], nil, new(bytes.Buffer)); err == nil || !strings.HasPrefix(err.Error(), "not an ONNX model") {
		t.Errorf("a truncated model: error %v, want not an ONNX model", err)
	}
}
