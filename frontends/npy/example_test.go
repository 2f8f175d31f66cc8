package npy_test

import (
	"bytes"
	"fmt"

	"github.com/kilnml/kiln/frontends/npy"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// The arrays of an archive numpy.savez wrote, by name.
func ExampleReadNPZFile() {
	arrays, err := npy.ReadNPZFile("testdata/stored.npz")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range arrays {
		fmt.Println(a.Name, a.Type, a.Float64s()[:2])
	}
	// Output:
	// x f64[4,3] [-1.25 -0.75]
	// y i64[4] [0 2]
}

// A tensor written as a .npy file and read back.
func ExampleEncode() {
	t, err := safetensors.FromFloat64("w", ir.F32, ir.Shape{2, 2}, []float64{1, 2, 3, 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := npy.Encode(t)
	if err != nil {
		fmt.Println(err)
		return
	}
	back, err := npy.Read(bytes.NewReader(b), "w.npy")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(b), back.Type, back.Float64s())
	// Output:
	// 144 f32[2,2] [1 2 3 4]
}
