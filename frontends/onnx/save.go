package onnx

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"google.golang.org/protobuf/proto"
)

// WriteTrained writes the ONNX model src (the serialized ModelProto that m
// was imported from) to w with the initializers that tensors name replaced
// by the tensors' values: a trained model's params, and the running
// statistics that training updates. Tensors are named as m names them (the
// kiln names of Model.Params and of a trainer's buffers). Everything else
// is kept as it was: every node, attribute, opset, metadata field and
// other initializer; a replaced initializer keeps its name, dtype and
// shape and stores its values in raw_data. An initializer left in an
// external data file still names that file, relative to the folder of the
// model written.
func (m *Model) WriteTrained(src []byte, tensors []safetensors.Tensor, w io.Writer) error {
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(src, &mp); err != nil {
		return fmt.Errorf("not an ONNX model (a truncated or damaged file?): %v", err)
	}
	if mp.Graph == nil {
		return errors.New("not an ONNX model: it has no graph")
	}
	byName := map[string]*onnxpb.TensorProto{}
	for _, t := range mp.Graph.Initializer {
		byName[t.GetName()] = t
	}
	for _, ts := range tensors {
		name, ok := m.names[ts.Name]
		if !ok {
			name = ts.Name
		}
		tp, ok := byName[name]
		if !ok {
			return fmt.Errorf("tensor %q is not an initializer of the model", ir.Excerpt(ts.Name))
		}
		want, err := checkedType(tp.GetDataType(), tp.Dims)
		if err != nil {
			return fmt.Errorf("initializer %q: %w", ir.Excerpt(name), err)
		}
		if !want.Equal(ts.Type) {
			return fmt.Errorf("tensor %q: the initializer is %s, the tensor %s", ir.Excerpt(ts.Name), want, ts.Type)
		}
		if len(ts.Data) != want.Bytes() {
			return fmt.Errorf("tensor %q: %d bytes of data, %s takes %d", ir.Excerpt(ts.Name), len(ts.Data), want, want.Bytes())
		}
		tp.RawData = slices.Clone(ts.Data)
		tp.FloatData, tp.DoubleData, tp.Int32Data, tp.Int64Data, tp.Uint64Data, tp.StringData = nil, nil, nil, nil, nil, nil
		tp.ExternalData, tp.DataLocation = nil, nil
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(&mp)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
