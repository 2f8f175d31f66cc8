package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/npy"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// csvTable parses the CSV text csvText (a header, then numbers) into its
// feature columns and its last column.
func csvTable(t *testing.T, csvText string) (x, y []float64, n, d int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(csvText), "\n")[1:]
	for _, line := range lines {
		f := strings.Split(line, ",")
		d = len(f) - 1
		for j, s := range f {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatal(err)
			}
			if j < d {
				x = append(x, v)
			} else {
				y = append(y, v)
			}
		}
	}
	return x, y, len(lines), d
}

// writeArrays writes tensors to dir/name as .safetensors or, by its
// extension, as .npz (a stored zip of .npy files, as numpy.savez writes).
func writeArrays(t *testing.T, dir, name string, tensors ...safetensors.Tensor) string {
	t.Helper()
	path := filepath.Join(dir, name)
	var data []byte
	if strings.HasSuffix(name, ".npz") {
		var b bytes.Buffer
		w := zip.NewWriter(&b)
		for _, ts := range tensors {
			f, err := w.CreateHeader(&zip.FileHeader{Name: ts.Name + ".npy", Method: zip.Store})
			if err != nil {
				t.Fatal(err)
			}
			enc, err := npy.Encode(ts)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(enc)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data = b.Bytes()
	} else {
		var err error
		if data, err = safetensors.Encode(tensors, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// regressionCSV returns rows rows of y = x0 - 2·x1 + noise with a header.
func regressionCSV(rows int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0))
	var b strings.Builder
	b.WriteString("x0,x1,y\n")
	for range rows {
		x0, x1 := 2*rng.Float64()-1, 2*rng.Float64()-1
		fmt.Fprintf(&b, "%.4f,%.4f,%.4f\n", x0, x1, x0-2*x1+0.01*(rng.Float64()-0.5))
	}
	return b.String()
}

// TestTrainArrayData trains on the same data as CSV, as .safetensors and as
// .npz: the params saved are the same bytes, for labels and for float
// targets (which CSV reads as regression targets for a model whose target
// input is float).
func TestTrainArrayData(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, model, csv string
		labels           ir.DType
	}{
		{"labels", tinyMLPKir, separableCSV(96, 2, 3), ir.I64},
		{"regression", regressionKir, regressionCSV(200, 5), ir.F64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			model := writeFile(t, "m.kir", tc.model)
			csvPath := filepath.Join(dir, "d.csv")
			if err := os.WriteFile(csvPath, []byte(tc.csv), 0o644); err != nil {
				t.Fatal(err)
			}
			x, y, n, d := csvTable(t, tc.csv)
			arrays := []safetensors.Tensor{
				tensor(t, "x", ir.F64, ir.Shape{n, d}, x),
				tensor(t, "y", tc.labels, ir.Shape{n}, y),
				tensor(t, "unused", ir.F32, ir.Shape{1}, []float64{0}),
			}
			var saved [][]byte
			for _, data := range []string{csvPath, writeArrays(t, dir, "d.safetensors", arrays...), writeArrays(t, dir, "d.npz", arrays...)} {
				out := data + ".params.safetensors"
				r := runKiln(t, "train", model, "-data", data, "-epochs", "3", "-save", out)
				r.want(t, 0)
				containsAll(t, "stdout", r.stdout, fmt.Sprintf("%d training rows, %d held out", n-n/5, n/5))
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				saved = append(saved, b)
			}
			if !bytes.Equal(saved[0], saved[1]) || !bytes.Equal(saved[0], saved[2]) {
				t.Error("the params trained on the CSV, .safetensors and .npz forms of the same data differ")
			}
		})
	}
}

// TestTrainArrayDataErrors checks that an array file that does not fit the
// model is one line naming the file and the array, exit status 1.
func TestTrainArrayDataErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := writeFile(t, "m.kir", tinyMLPKir)
	x := tensor(t, "x", ir.F32, ir.Shape{16, 2}, make([]float64, 32))
	y := tensor(t, "y", ir.I64, ir.Shape{16}, make([]float64, 16))
	for _, tc := range []struct {
		name string
		file string
		want string
	}{
		{"missing", writeArrays(t, dir, "a.npz", x), `a.npz: expected an array "y" (the model's targets), found only "x"`},
		{"shape", writeArrays(t, dir, "b.safetensors", tensor(t, "x", ir.F32, ir.Shape{16, 3}, make([]float64, 48)), y), `b.safetensors: array "x": expected shape [N,2] (examples along the first axis), found [16,3]`},
		{"labels", writeArrays(t, dir, "c.npz", x, tensor(t, "y", ir.I64, ir.Shape{16}, append(make([]float64, 15), 2))), `c.npz: array "y": example 15: expected labels from 0 to 1, found 2`},
		{"numpy file", filepath.Join("..", "..", "frontends", "npy", "testdata", "stored.npz"), `stored.npz: array "x": expected shape [N,2] (examples along the first axis), found [4,3]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runKiln(t, "train", model, "-data", tc.file, "-epochs", "1")
			r.want(t, 1)
			if line := oneLine(t, r.stderr); !strings.Contains(line, tc.want) {
				t.Errorf("error %q, want %q", line, tc.want)
			}
		})
	}
}
