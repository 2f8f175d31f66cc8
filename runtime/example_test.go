package runtime_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"

	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/runtime"
)

// Train from a plan file that kiln compile wrote, without the compiler:
// load it, train three epochs on the digits data, evaluate and save the
// params.
func Example() {
	p, err := runtime.Load("testdata/digits.kplan")
	if err != nil {
		log.Fatal(err)
	}
	t, err := runtime.NewTrainer(p, runtime.ExecOptions{Device: "cpu", Seed: p.Seed})
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	data, err := dataset.Digits()
	if err != nil {
		log.Fatal(err)
	}
	train, heldOut := data.Split(0.2, 1)
	ctx := context.Background()
	for epoch := 1; epoch <= 3; epoch++ {
		train.Shuffle(uint64(epoch))
		loss, acc, err := t.Epoch(ctx, train)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("epoch %d: loss %.3f, accuracy %.3f\n", epoch, loss, acc)
	}
	loss, acc, err := t.Evaluate(ctx, heldOut)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("held out: loss %.3f, accuracy %.3f\n", loss, acc)

	dir, err := os.MkdirTemp("", "digits")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := t.SaveParams(filepath.Join(dir, "digits.safetensors")); err != nil {
		log.Fatal(err)
	}
	fmt.Println("saved", len(p.Train.Params), "params")
	// Output:
	// epoch 1: loss 2.562, accuracy 0.362
	// epoch 2: loss 0.893, accuracy 0.663
	// epoch 3: loss 0.495, accuracy 0.832
	// held out: loss 0.444, accuracy 0.838
	// saved 4 params
}

// Classify rows with the params of a trained model: Predict returns the
// logits of each row, here with the targets left at zero.
func ExampleTrainer_Predict() {
	p, err := runtime.Load("testdata/digits.kplan")
	if err != nil {
		log.Fatal(err)
	}
	t, err := runtime.NewTrainer(p, runtime.ExecOptions{Seed: p.Seed})
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	data, err := dataset.Digits()
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for range 5 {
		if _, _, err := t.Epoch(ctx, data); err != nil {
			log.Fatal(err)
		}
	}
	rows := &dataset.Dataset{X: data.X[:4*64], Y: make([]int64, 4), N: 4, D: 64, Classes: 10}
	logits, err := t.Predict(ctx, rows)
	if err != nil {
		log.Fatal(err)
	}
	for r := range rows.N {
		row := logits[r*10 : (r+1)*10]
		fmt.Printf("row %d: class %d (label %d)\n", r, slices.Index(row, slices.Max(row)), data.Y[r])
	}
	// Output:
	// row 0: class 0 (label 0)
	// row 1: class 1 (label 1)
	// row 2: class 2 (label 2)
	// row 3: class 3 (label 3)
}
