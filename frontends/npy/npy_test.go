package npy

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// golden is testdata/golden.json, written by tests/npy/write.py with numpy.
type golden map[string]struct {
	Shape  []int
	Values []float64
}

func readGolden(t *testing.T) golden {
	t.Helper()
	b, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func checkValues(t *testing.T, got safetensors.Tensor, dt ir.DType, shape []int, want []float64) {
	t.Helper()
	if got.Type.DType != dt || !got.Type.Shape.Equal(ir.Shape(shape)) {
		t.Fatalf("%s: type %s, want %s%v", got.Name, got.Type, dt, shape)
	}
	v := got.Float64s()
	if len(v) != len(want) {
		t.Fatalf("%s: %d values, want %d", got.Name, len(v), len(want))
	}
	for i := range v {
		if v[i] != want[i] {
			t.Errorf("%s: value %d is %v, want %v", got.Name, i, v[i], want[i])
		}
	}
}

// TestReadGolden reads every array numpy wrote, in each format version, and
// compares its values exactly with those numpy printed.
func TestReadGolden(t *testing.T) {
	g := readGolden(t)
	for _, tc := range []struct {
		file, golden string
		dt           ir.DType
	}{
		{"f4_2x3.npy", "f4_2x3", ir.F32},
		{"f8_vec.npy", "f8_vec", ir.F64},
		{"i4_3x2.npy", "i4_3x2", ir.I32},
		{"i8_vec.npy", "i8_vec", ir.I64},
		{"b1_2x2.npy", "b1_2x2", ir.Bool},
		{"f8_scalar.npy", "f8_scalar", ir.F64},
		{"f4_empty.npy", "f4_empty", ir.F32},
		{"f8_4x3.npy", "f8_4x3", ir.F64},
		{"f8_4x3_v2.npy", "f8_4x3", ir.F64},
		{"f8_4x3_v3.npy", "f8_4x3", ir.F64},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			w := g[tc.golden]
			checkValues(t, got, tc.dt, w.Shape, w.Values)
			// Encode writes what numpy wrote, byte for byte, for version 1.0.
			if !strings.Contains(tc.file, "_v") {
				enc, err := Encode(got)
				if err != nil {
					t.Fatal(err)
				}
				src, _ := os.ReadFile(filepath.Join("testdata", tc.file))
				if !bytes.Equal(enc, src) {
					t.Errorf("Encode gives\n%q\nnumpy wrote\n%q", enc, src)
				}
			}
		})
	}
}

// TestReadNPZGolden reads numpy.savez's stored archive and
// numpy.savez_compressed's deflated one.
func TestReadNPZGolden(t *testing.T) {
	g := readGolden(t)
	for _, file := range []string{"stored.npz", "deflated.npz"} {
		t.Run(file, func(t *testing.T) {
			ts, err := ReadNPZFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != 2 || ts[0].Name != "x" || ts[1].Name != "y" {
				t.Fatalf("arrays %v, want x and y", names(ts))
			}
			checkValues(t, ts[0], ir.F64, g["f8_4x3"].Shape, g["f8_4x3"].Values)
			checkValues(t, ts[1], ir.I64, []int{4}, []float64{0, 2, 1, 2})
		})
	}
}

func names(ts []safetensors.Tensor) []string {
	var s []string
	for _, t := range ts {
		s = append(s, t.Name)
	}
	return s
}

// npyBytes builds a version 1.0 file with header h and data.
func npyBytes(h string, data []byte) []byte {
	b := []byte(magic + "\x01\x00")
	b = append(b, byte(len(h)), byte(len(h)>>8))
	return append(append(b, h...), data...)
}

// TestReadErrors checks that each malformed or refused file gives one line
// naming the file and saying what was expected and found.
func TestReadErrors(t *testing.T) {
	f8 := func(n int) []byte { return make([]byte, 8*n) }
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, `a.npy: expected a .npy array (starting with "\x93NUMPY"), found ""`},
		{"magic", []byte("PK\x03\x04hello"), `expected a .npy array`},
		{"version", []byte(magic + "\x04\x00\x00\x00"), "expected format version 1.0, 2.0 or 3.0, found 4.0"},
		{"minor", []byte(magic + "\x01\x01\x00\x00"), "found 1.1"},
		{"short length", []byte(magic + "\x01\x00\x05"), "the header's length: the data ends early"},
		{"v2 huge header", []byte(magic + "\x02\x00\xff\xff\xff\x7f"), "expected a header of at most 65536 bytes, found 2147483647"},
		{"short header", []byte(magic + "\x01\x00\x50\x00{'descr'"), "the header of 80 bytes runs past the end of the data (18 bytes)"},
		{"not a dict", npyBytes("[1, 2]\n", nil), "header: expected a dict"},
		{"big endian", npyBytes("{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }\n", f8(1)), `expected dtype '<f4', '<f8', '<i4', '<i8' or '|b1', found ">f8"`},
		{"float16", npyBytes("{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }\n", f8(1)), `found "<f2"`},
		{"structured", npyBytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", f8(1)), "found a structured dtype"},
		{"fortran", npyBytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }\n", f8(4)), "expected C order, found a Fortran-order array (numpy.ascontiguousarray writes C order)"},
		{"fortran value", npyBytes("{'descr': '<f8', 'fortran_order': 1, 'shape': (1,), }\n", f8(1)), "'fortran_order': expected True or False"},
		{"negative dim", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }\n", nil), "'shape': expected a dimension from 0 to 2^40"},
		{"huge dim", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627777,), }\n", nil), "expected a dimension from 0 to 2^40"},
		{"huge array", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1048576, 1048576), }\n", nil), "f64[1048576,1048576] is too large"},
		{"too large for memory", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }\n", nil), "too large"},
		{"missing key", npyBytes("{'descr': '<f8', 'shape': (1,), }\n", f8(1)), "expected the key 'fortran_order', found none"},
		{"unknown key", npyBytes("{'descr': '<f8', 'order': 'C', 'shape': (1,), }\n", f8(1)), `expected the keys 'descr', 'fortran_order' and 'shape', found "order"`},
		{"twice", npyBytes("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", f8(1)), `key "descr" appears twice`},
		{"trailing", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), } x\n", f8(1)), `expected the end after '}', found "x"`},
		{"short data", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n", f8(2)), "f64[3] needs 24 bytes of data, found 16"},
		{"long data", npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", f8(2)), "f64[1] needs 8 bytes of data, found 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.npy")
			if err := os.WriteFile(path, tc.data, 0o666); err != nil {
				t.Fatal(err)
			}
			_, err := ReadFile(path)
			if err == nil {
				t.Fatal("no error")
			}
			msg := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
			if !strings.HasPrefix(msg, "a.npy: ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line starting with a.npy: and holding %q", msg, tc.want)
			}
			// The stream reader, which does not know the size, agrees.
			if _, err := Read(bytes.NewReader(tc.data), "a.npy"); err == nil {
				t.Error("Read: no error")
			}
		})
	}
}

// TestReadGoldenErrors reads the files numpy wrote that kiln refuses.
func TestReadGoldenErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"bad_fortran.npy", "bad_fortran.npy: expected C order, found a Fortran-order array (numpy.ascontiguousarray writes C order)"},
		{"bad_bigendian.npy", `bad_bigendian.npy: expected dtype '<f4', '<f8', '<i4', '<i8' or '|b1', found ">f4"`},
		{"bad_u1.npy", `bad_u1.npy: expected dtype '<f4', '<f8', '<i4', '<i8' or '|b1', found "|u1"`},
	} {
		_, err := ReadFile(filepath.Join("testdata", tc.file))
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one ending %q", tc.file, err, tc.want)
		}
	}
}

// zipOf builds a zip archive of the given members, stored.
func zipOf(t testing.TB, members ...string) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for i := 0; i < len(members); i += 2 {
		f, err := w.CreateHeader(&zip.FileHeader{Name: members[i], Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(members[i+1]))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReadNPZErrors checks the archive's own errors, each naming the file
// and the array.
func TestReadNPZErrors(t *testing.T) {
	one := string(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", make([]byte, 8)))
	short := string(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n", make([]byte, 8)))
	stored, _ := os.ReadFile("testdata/stored.npz")
	corrupt := bytes.Clone(stored)
	// Flip a byte of x's data: the CRC check finds it.
	i := bytes.Index(corrupt, []byte("'shape': (4, 3)"))
	corrupt[i+150] ^= 1
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"not zip", []byte("hello"), "d.npz: expected a .npz file (a zip archive of .npy arrays)"},
		{"empty", zipOf(t), "d.npz: expected at least one array, found none"},
		{"other member", zipOf(t, "x.npy", one, "notes.txt", "hi"), `d.npz: member "notes.txt": expected a .npy array, found another file`},
		{"twice", zipOf(t, "x.npy", one, "x.npy", one), `d.npz: array "x" appears twice`},
		{"short", zipOf(t, "x.npy", one, "y.npy", short), `d.npz: array "y": f64[2] needs 16 bytes of data, found 8`},
		{"crc", corrupt, `d.npz: array "x": zip: checksum error`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadNPZ(bytes.NewReader(tc.data), int64(len(tc.data)), "d.npz")
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line holding %q", err, tc.want)
			}
		})
	}
}

// FuzzRead checks that no input makes Read panic or return an array whose
// data does not match its type.
func FuzzRead(f *testing.F) {
	for _, name := range []string{"f4_2x3.npy", "b1_2x2.npy", "f8_4x3_v2.npy", "f8_4x3_v3.npy", "bad_fortran.npy"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tt, err := Read(bytes.NewReader(data), "f.npy")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error of several lines: %q", err)
			}
			return
		}
		if len(tt.Data) != tt.Type.Bytes() {
			t.Errorf("%s with %d bytes", tt.Type, len(tt.Data))
		}
	})
}

// FuzzReadNPZ checks that no archive makes ReadNPZ panic.
func FuzzReadNPZ(f *testing.F) {
	for _, name := range []string{"stored.npz", "deflated.npz"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ReadNPZ(bytes.NewReader(data), int64(len(data)), "f.npz")
		for _, tt := range ts {
			if len(tt.Data) != tt.Type.Bytes() {
				t.Errorf("%s with %d bytes", tt.Type, len(tt.Data))
			}
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error of several lines: %q", err)
		}
	})
}
