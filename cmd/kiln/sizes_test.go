package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"testing"
)

// TestShapesOverTheLimit checks that the shapes of the report that gave
// rise to ir.MaxTensorBytes are refused where they are declared, with one
// line naming the file and position and exit status 1, by every command
// that reads a model: none trains "(0 values)", plans a wrapped arena or
// panics.
func TestShapesOverTheLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, want string
		cmd             []string
	}{
		{"param wraps", "graph big\nparam %w: f32[4611686018427387904,4]\n%l = sum %w\noutput %l\n",
			"m.kir:2:11: shape [4611686018427387904,4] has a dimension of 4611686018427387904; the limit is 2^40 (ir.MaxTensorBytes)",
			[]string{"train", "-steps", "1"}},
		{"count wraps", "graph big\nparam %w: f32[4294967296,4294967296,4294967296]\n%l = sum %w\noutput %l\n",
			"m.kir:2:11: shape [4294967296,4294967296,4294967296] has 7.92e+28 elements; the limit is 2^40 (ir.MaxTensorBytes)",
			[]string{"plan"}},
		{"input one past", "graph big\ninput %x: f32[4611686018427387905,4]\nparam %w: f32[4,1]\n%y = matmul %x, %w\n%l = sum %y\noutput %l\n",
			"m.kir:2:11: shape [4611686018427387905,4] has a dimension of 4611686018427387905; the limit is 2^40 (ir.MaxTensorBytes)",
			[]string{"bench", "-steps", "1", "-warmup", "0"}},
		{"makeslice", "graph big\nparam %w: f32[1000000000,1000000000]\n%l = sum %w\noutput %l\n",
			"m.kir:2:11: shape [1000000000,1000000000] has 1e+18 elements; the limit is 2^40 (ir.MaxTensorBytes)",
			[]string{"train", "-steps", "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, "m.kir", tc.src)
			r := runKiln(t, append(tc.cmd, path)...)
			r.want(t, 1)
			line := oneLine(t, r.stderr)
			want := "kiln " + tc.cmd[0] + ": " + path[:len(path)-len("m.kir")] + tc.want
			if line != want {
				t.Errorf("stderr:\n got  %s\n want %s", line, want)
			}
		})
	}
}

// TestBenchBatchTooLarge checks that kiln bench refuses a -batch whose
// arena does not fit in the memory available, before allocating it, and a
// -batch that makes an input too large for a tensor. The memory available
// is capped with the Go memory limit (which sysmem honours) so that the
// test does the same on machines of any size; it changes the process's
// limit, so it does not run in parallel.
func TestBenchBatchTooLarge(t *testing.T) {
	old := debug.SetMemoryLimit(16 << 30)
	defer debug.SetMemoryLimit(old)

	r := runKiln(t, "bench", "-batch", "100000000", digitsMLP)
	r.want(t, 1)
	line := oneLine(t, r.stderr)
	re := regexp.MustCompile(`^kiln bench: \.\./\.\./examples/digits/mlp\.kir: plan digits_mlp: arena of 79\.7 GiB exceeds the [0-9.]+ GiB of memory available$`)
	if !re.MatchString(line) {
		t.Errorf("stderr %q does not match %s", line, re)
	}

	r = runKiln(t, "bench", "-batch", "4611686018427387904", digitsMLP)
	r.want(t, 1)
	line = oneLine(t, r.stderr)
	want := "kiln bench: ../../examples/digits/mlp.kir: -batch 4611686018427387904: input %x: shape [4611686018427387904,64] has a dimension of 4611686018427387904; the limit is 2^40 (ir.MaxTensorBytes)"
	if line != want {
		t.Errorf("stderr:\n got  %s\n want %s", line, want)
	}
}

// TestBenchRandomInputsTooLarge checks that kiln bench refuses random
// inputs that do not fit beside the arena, before drawing them: at batch
// 10^6 the digits MLP's arena (0.8 GiB) fits under a limit of 1.2 GiB, but
// not with its float64 inputs. It changes the process's memory limit, so
// it does not run in parallel.
func TestBenchRandomInputsTooLarge(t *testing.T) {
	old := debug.SetMemoryLimit(1200 << 20)
	defer debug.SetMemoryLimit(old)

	r := runKiln(t, "bench", "-batch", "1000000", "-workers", "1", digitsMLP)
	r.want(t, 1)
	line := oneLine(t, r.stderr)
	re := regexp.MustCompile(`^kiln bench: \.\./\.\./examples/digits/mlp\.kir: arena and random inputs of 1\.[0-9] GiB exceeds the [0-9.]+ [GM]iB of memory available$`)
	if !re.MatchString(line) {
		t.Errorf("stderr %q does not match %s", line, re)
	}
}

// TestModelFileTooLarge checks that a model file larger than the memory
// available is refused before it is read. The file is sparse, and the
// memory available is capped with the Go memory limit, so the test changes
// the process's limit and does not run in parallel.
func TestModelFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.kir")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	old := debug.SetMemoryLimit(256 << 20)
	defer debug.SetMemoryLimit(old)
	r := runKiln(t, "plan", path)
	r.want(t, 1)
	if line, want := oneLine(t, r.stderr), "kiln plan: "+path+": file of 1.0 GiB exceeds the 256.0 MiB of memory available"; line != want {
		t.Errorf("stderr:\n got  %s\n want %s", line, want)
	}
}

// TestTrainRowsTooMany checks that kiln train refuses a generated data set
// of more rows than any process can address, before allocating it.
func TestTrainRowsTooMany(t *testing.T) {
	t.Parallel()
	r := runKiln(t, "train", "../../examples/kan/kan.kir", "-data", "kan2d", "-rows", "4611686018427387904")
	r.want(t, 1)
	want := "kiln train: kan2d: 4611686018427387904 rows of 24 bytes each exceed the 128.0 TiB any process can address"
	if line := oneLine(t, r.stderr); line != want {
		t.Errorf("stderr:\n got  %s\n want %s", line, want)
	}
}
