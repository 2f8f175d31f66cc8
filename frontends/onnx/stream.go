package onnx

import (
	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Field numbers of the parts of a model that hold the bulk of its bytes.
var (
	modelGraphField = fieldNumber(&onnxpb.ModelProto{}, "graph")
	graphInitField  = fieldNumber(&onnxpb.GraphProto{}, "initializer")
	tensorRawField  = fieldNumber(&onnxpb.TensorProto{}, "raw_data")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// unmarshalModel decodes a ModelProto as proto.Unmarshal does, except that
// the raw_data of the graph's initializers alias data instead of being
// copied (the protobuf decoder copies every bytes field): a model is then
// held once in memory, not twice. The rest of the model, small beside its
// weights, is decoded by proto.Unmarshal without them. A model this walk
// does not take apart (a graph field given twice, a malformed encoding)
// is decoded by proto.Unmarshal alone, which also gives its error.
func unmarshalModel(data []byte) (*onnxpb.ModelProto, error) {
	var mp onnxpb.ModelProto
	if small, raws, ok := splitRaw(data); ok {
		if err := proto.Unmarshal(small, &mp); err == nil && len(mp.GetGraph().GetInitializer()) == len(raws) {
			for k, t := range mp.Graph.Initializer {
				if raws[k] != nil {
					t.RawData = raws[k]
				}
			}
			return &mp, nil
		}
	}
	if err := proto.Unmarshal(data, &mp); err != nil {
		return nil, err
	}
	return &mp, nil
}

// splitRaw returns the encoding of the model in data without the raw_data
// of its initializers, and those raw_data (nil where an initializer has
// none), which alias data.
func splitRaw(data []byte) (small []byte, raws [][]byte, ok bool) {
	var graph []byte
	seen := false
	small = make([]byte, 0, 1024)
	if !eachField(data, func(num protowire.Number, typ protowire.Type, field, value []byte) {
		if num == modelGraphField && typ == protowire.BytesType {
			graph = value
			ok = !seen
			seen = true
			return
		}
		small = append(small, field...)
	}) || !seen || !ok {
		return nil, nil, false
	}
	ng := make([]byte, 0, 1024)
	good := eachField(graph, func(num protowire.Number, typ protowire.Type, field, value []byte) {
		if num != graphInitField || typ != protowire.BytesType {
			ng = append(ng, field...)
			return
		}
		var raw []byte
		t := make([]byte, 0, 64)
		if !eachField(value, func(num protowire.Number, typ protowire.Type, field, value []byte) {
			if num == tensorRawField && typ == protowire.BytesType {
				raw = value[:len(value):len(value)] // the last one wins, as in proto.Unmarshal
				return
			}
			t = append(t, field...)
		}) {
			ok = false
		}
		raws = append(raws, raw)
		ng = protowire.AppendTag(ng, graphInitField, protowire.BytesType)
		ng = protowire.AppendBytes(ng, t)
	})
	if !good || !ok {
		return nil, nil, false
	}
	small = protowire.AppendTag(small, modelGraphField, protowire.BytesType)
	small = protowire.AppendBytes(small, ng)
	return small, raws, true
}

// eachField calls f with every field of the message encoded in b: its
// number, wire type, whole encoding and, for a length-delimited field, its
// contents. It reports false for a malformed encoding.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, field, value []byte)) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return false
		}
		var value []byte
		if typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(b[n:])
			if k < 0 {
				return false
			}
			value = v
		}
		f(num, typ, b[:n+m], value)
		b = b[n+m:]
	}
	return true
}
