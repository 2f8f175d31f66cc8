package onnx

import (
	"testing"
	"unsafe"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// within reports whether b's bytes lie inside buf.
func within(b, buf []byte) bool {
	if len(b) == 0 || len(buf) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&buf[0]))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(buf))
}

// TestUnmarshalModel checks that unmarshalModel decodes what proto.Unmarshal
// decodes, with the initializers' raw_data inside the input buffer rather
// than copied, for initializers in raw_data, typed fields and with empty
// raw_data; a model with its graph field twice (which protobuf merges) and
// a truncated one are decoded by proto.Unmarshal alone.
func TestUnmarshalModel(t *testing.T) {
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(bigMLP(2, 8), &mp); err != nil {
		t.Fatal(err)
	}
	mp.Graph.Initializer = append(mp.Graph.Initializer, f32s("typed", []int64{2}, 1, 2),
		&onnxpb.TensorProto{Name: proto.String("empty"), DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Dims: []int64{0}, RawData: []byte{}})
	mp.ProducerName = proto.String("after the graph") // a field after the graph field
	data, err := proto.Marshal(&mp)
	if err != nil {
		t.Fatal(err)
	}
	twice := protowire.AppendTag(append([]byte(nil), data...), modelGraphField, protowire.BytesType)
	twice = protowire.AppendBytes(twice, mustMarshal(t, &onnxpb.GraphProto{Name: proto.String("second")}))
	for _, tc := range []struct {
		name  string
		data  []byte
		alias bool
	}{{"raw data aliased", data, true}, {"graph twice", twice, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var want onnxpb.ModelProto
			if err := proto.Unmarshal(tc.data, &want); err != nil {
				t.Fatal(err)
			}
			got, err := unmarshalModel(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, &want) {
				t.Fatalf("unmarshalModel differs from proto.Unmarshal")
			}
			for _, in := range got.Graph.Initializer {
				if a := within(in.RawData, tc.data); len(in.RawData) > 0 && a != tc.alias {
					t.Errorf("initializer %q: raw_data inside the input buffer: %v, want %v", in.GetName(), a, tc.alias)
				}
			}
			if in := got.Graph.Initializer[len(got.Graph.Initializer)-1]; in.RawData == nil {
				t.Errorf("empty raw_data decoded as absent")
			}
		})
	}
	if _, err := unmarshalModel(data[:len(data)-3]); err == nil {
		t.Errorf("a truncated model decoded without error")
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
