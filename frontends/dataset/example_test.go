package dataset_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/ir"
)

func ExampleReadCSV() {
	const csv = `x0,x1,label
0.5,1.0,0
1.5,-2.0,2

3.0,0.25,1
`
	d, err := dataset.ReadCSV(strings.NewReader(csv), "example.csv")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows:", d.N, "features:", d.D, "classes:", d.Classes)
	fmt.Println("X:", d.X)
	fmt.Println("Y:", d.Y)

	_, err = dataset.ReadCSV(strings.NewReader("1,2,0\n3,oops,1\n"), "bad.csv")
	fmt.Println(err)
	// Output:
	// rows: 3 features: 2 classes: 3
	// X: [0.5 1 1.5 -2 3 0.25]
	// Y: [0 2 1]
	// bad.csv:2: column 2: expected a number, found "oops"
}

func ExampleReverse() {
	d, err := dataset.Reverse(100, 4, 10, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows:", d.N, "tokens per row:", d.D, "labels per row:", d.Targets(), "vocabulary:", d.Vocab)
	fmt.Println("first sequence:", d.X[:4], "its labels:", d.Y[:4])
	// Output:
	// rows: 100 tokens per row: 4 labels per row: 4 vocabulary: 10
	// first sequence: [7 6 7 7] its labels: [7 7 6 7]
}

// Arrays named as a model's inputs, examples along the first axis: here
// features [N,2,2] and integer labels [N] that numpy.savez wrote.
func ExampleLoadArrays() {
	d, err := dataset.LoadArrays("testdata/train.npz", dataset.ArraySpec{
		Features: "x", Targets: "y", FeatureDims: ir.Shape{2, 2}, Classes: 3,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.N, "rows of", d.D, "features; labels", d.Y)
	// Output:
	// 6 rows of 4 features; labels [0 1 2 0 1 2]
}
