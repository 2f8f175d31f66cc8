package main

import (
	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/dataset"
)

// arraySpec returns what a data file of arrays must hold for t: arrays
// named as the model's two inputs, features then targets, with one
// example's dims after the first axis.
func arraySpec(t *kiln.Trainer) dataset.ArraySpec {
	sig := t.Signature()
	g := t.Plan.Graph
	ins := g.Inputs()
	return dataset.ArraySpec{
		Features: sig.Features, Targets: sig.Targets,
		FeatureDims: g.Type(ins[0]).Shape[1:], TargetDims: g.Type(ins[1]).Shape[1:],
		Tokens: sig.Tokens, FloatTargets: sig.Kind == kiln.Regression, Classes: sig.Classes,
	}
}

// loadDataFile reads a data file for the model t trains: arrays in a
// .safetensors or .npz file, else a CSV file read with -header, whose last
// column is a label, or a float target when the model's targets are float.
func (l *loopFlags) loadDataFile(t *kiln.Trainer, path string) (*dataset.Dataset, error) {
	if dataset.IsArrayFile(path) {
		return dataset.LoadArrays(path, arraySpec(t))
	}
	sig := t.Signature()
	header, _ := dataset.ParseHeader(l.header) // checked by check
	o := dataset.CSVOptions{Header: header, FloatTargets: sig.Kind == kiln.Regression}
	if sig.Kind == kiln.Labels {
		o.Classes = sig.Classes
	}
	return dataset.LoadCSVWith(path, o)
}
