// Command plantrain trains from a plan file with the runtime package
// alone, as a program that embeds kiln would: it links no compiler, and its
// binary size is compared with the kiln CLI's in docs/PERFORMANCE.md.
//
//	go run ./examples/plantrain [-data FILE.csv] [-epochs N] [-out PARAMS.safetensors] MODEL.kplan
//
// It trains on the CSV file's rows (the digits data without -data), one
// fifth of them held out, and prints each epoch's loss and metric and the
// held-out ones.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/runtime"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "plantrain:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("plantrain", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dataPath := fs.String("data", "", "CSV `file` to train on (default: the digits data)")
	epochs := fs.Int("epochs", 3, "training `epochs`")
	out := fs.String("out", "", "write the trained params to this safetensors `file`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: plantrain [-data FILE.csv] [-epochs N] [-out PARAMS.safetensors] MODEL.kplan")
	}
	if *epochs < 1 {
		return fmt.Errorf("-epochs %d: expected at least 1", *epochs)
	}
	p, err := runtime.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	t, err := runtime.NewTrainer(p, runtime.ExecOptions{Seed: p.Seed})
	if err != nil {
		return err
	}
	defer t.Close()
	data, err := dataset.Digits()
	if *dataPath != "" {
		data, err = dataset.LoadCSV(*dataPath)
	}
	if err != nil {
		return err
	}
	train, heldOut := data.Split(0.2, p.Seed)
	metric := t.Signature().Metric()
	ctx := context.Background()
	for e := 1; e <= *epochs; e++ {
		train.Shuffle(p.Seed + uint64(e))
		loss, m, err := t.Epoch(ctx, train)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "epoch %d: loss %.4f, %s %.4f\n", e, loss, metric, m)
	}
	loss, m, err := t.Evaluate(ctx, heldOut)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "held out: loss %.4f, %s %.4f\n", loss, metric, m)
	if *out != "" {
		return t.SaveParams(*out)
	}
	return nil
}
