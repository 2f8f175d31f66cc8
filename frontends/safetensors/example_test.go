package safetensors_test

import (
	"fmt"
	"log"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

func ExampleEncode() {
	w, err := safetensors.FromFloat64("w", ir.F32, ir.Shape{2, 2}, []float64{1, 2, 3, 4})
	if err != nil {
		log.Fatal(err)
	}
	step, err := safetensors.FromFloat64("step", ir.I64, ir.Shape{}, []float64{100})
	if err != nil {
		log.Fatal(err)
	}
	data, err := safetensors.Encode([]safetensors.Tensor{w, step}, map[string]string{"format": "kiln"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(data), "bytes")

	tensors, meta, err := safetensors.Decode(data)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("format:", meta["format"])
	for _, t := range tensors {
		fmt.Println(t.Name, t.Type, t.Float64s())
	}
	// Output:
	// 184 bytes
	// format: kiln
	// step i64[] [100]
	// w f32[2,2] [1 2 3 4]
}
