package npy_test

import (
	"fmt"

	"github.com/kilnml/kiln/frontends/npy"
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
