package dataset

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/frontends/npy"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/internal/sysmem"
	"github.com/kilnml/kiln/ir"
)

// ArraySpec says which arrays of a file FromArrays reads and what they must
// hold: a model's two inputs, features then targets, by name and by the
// shape of one example (the input's dims after the batch).
type ArraySpec struct {
	Features, Targets       string   // the arrays' names
	FeatureDims, TargetDims ir.Shape // one example's dims: [D], [C,H,W], [T]; [] for one label
	Tokens                  bool     // the features are integer tokens
	FloatTargets            bool     // the targets are float values (regression), not integer labels
	Classes                 int      // when > 0, every label must be below it
}

// IsArrayFile reports whether path names a file of arrays, by its
// extension: .safetensors or .npz, which LoadArrays reads, or .npy, which
// it refuses with the advice to write an .npz file.
func IsArrayFile(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".safetensors" || ext == ".npz" || ext == ".npy"
}

// LoadArrays reads the data set in the .safetensors or .npz file at path
// (see FromArrays). Errors name the file.
func LoadArrays(path string, s ArraySpec) (*Dataset, error) {
	var (
		arrays []safetensors.Tensor
		err    error
	)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".safetensors":
		arrays, _, err = safetensors.ReadFile(path)
	case ".npz":
		arrays, err = npy.ReadNPZFile(path)
	case ".npy":
		return nil, fmt.Errorf("%s: expected a file of the arrays %q and %q, found a .npy file, which holds one array; numpy.savez(\"data.npz\", %s=..., %s=...) writes both", path, s.Features, s.Targets, s.Features, s.Targets)
	default:
		return nil, fmt.Errorf("%s: expected a .safetensors or .npz file of arrays", path)
	}
	if err != nil {
		return nil, err
	}
	return FromArrays(path, arrays, s)
}

// FromArrays builds a data set from the arrays s names: the first axis of
// each counts the examples, which both arrays must have alike, and the rest
// must be one example's dims exactly. Float, integer and bool features
// become float64 features (integer features for Tokens); targets are
// integer (or bool) labels, or any numbers with FloatTargets. Other arrays
// are ignored. Errors are one line naming name (the file), the array, what
// was expected and what was found.
func FromArrays(name string, arrays []safetensors.Tensor, s ArraySpec) (*Dataset, error) {
	find := func(what, want string) (safetensors.Tensor, error) {
		for _, a := range arrays {
			if a.Name == want {
				return a, nil
			}
		}
		var have []string
		for _, a := range arrays {
			have = append(have, strconv.Quote(a.Name))
		}
		slices.Sort(have)
		return safetensors.Tensor{}, fmt.Errorf("%s: expected an array %q (the model's %s), found only %s", name, want, what, ir.Excerpt(strings.Join(have, ", ")))
	}
	x, err := find("features", s.Features)
	if err != nil {
		return nil, err
	}
	y, err := find("targets", s.Targets)
	if err != nil {
		return nil, err
	}
	shape := func(a safetensors.Tensor, dims ir.Shape) error {
		want := "[N]"
		if len(dims) > 0 {
			want = "[N," + strings.TrimPrefix(dims.String(), "[")
		}
		if len(a.Type.Shape) == 0 || !a.Type.Shape[1:].Equal(dims) {
			return fmt.Errorf("%s: array %q: expected shape %s (examples along the first axis), found %s", name, a.Name, want, a.Type.Shape)
		}
		return nil
	}
	if err := shape(x, s.FeatureDims); err != nil {
		return nil, err
	}
	if err := shape(y, s.TargetDims); err != nil {
		return nil, err
	}
	n := x.Type.Shape[0]
	if y.Type.Shape[0] != n {
		return nil, fmt.Errorf("%s: array %q has %d examples, array %q has %d", name, y.Name, y.Type.Shape[0], x.Name, n)
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: array %q: expected at least one example, found none", name, x.Name)
	}
	isInt := func(dt ir.DType) bool { return dt.IsInt() || dt == ir.Bool }
	if s.Tokens && !isInt(x.Type.DType) {
		return nil, fmt.Errorf("%s: array %q: expected integer tokens (i32 or i64) for the model's input, found %s", name, x.Name, x.Type.DType)
	}
	if !s.FloatTargets && !isInt(y.Type.DType) {
		return nil, fmt.Errorf("%s: array %q: expected integer labels (i32 or i64) for the model's input, found %s", name, y.Name, y.Type.DType)
	}
	d, k := s.FeatureDims.NumElements(), max(s.TargetDims.NumElements(), 1)
	if err := sysmem.Check(name+": the data's float64 copy", 8*int64(n)*int64(d+k)); err != nil {
		return nil, err
	}
	ds := &Dataset{N: n, D: d, X: x.Float64s()}
	if len(s.TargetDims) > 0 {
		ds.K = k
	}
	for i, v := range ds.X {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%s: array %q: example %d: expected finite features, found %g", name, x.Name, i/max(d, 1), v)
		}
	}
	ys := y.Float64s()
	if s.FloatTargets {
		for i, v := range ys {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s: array %q: example %d: expected finite targets, found %g", name, y.Name, i/k, v)
			}
		}
		ds.R = ys
		return ds, nil
	}
	ds.Y = make([]int64, len(ys))
	for i, v := range ys {
		if v < 0 || v > maxLabel || (s.Classes > 0 && v >= float64(s.Classes)) {
			top := maxLabel
			if s.Classes > 0 {
				top = s.Classes - 1
			}
			return nil, fmt.Errorf("%s: array %q: example %d: expected labels from 0 to %d, found %g", name, y.Name, i/k, top, v)
		}
		ds.Y[i] = int64(v)
		ds.Classes = max(ds.Classes, int(v)+1)
	}
	return ds, nil
}
