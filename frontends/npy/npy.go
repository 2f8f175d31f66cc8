// Package npy reads NumPy's array files: .npy, one array (format versions
// 1.0, 2.0 and 3.0), and .npz, a zip archive of .npy files (stored or
// deflated, as numpy.savez and numpy.savez_compressed write them). It reads
// the dtypes kiln computes in, little-endian float32, float64, int32,
// int64 and bool ('<f4', '<f8', '<i4', '<i8', '|b1'), in C order; any other
// dtype, a big-endian one, or a Fortran-order array is refused with one
// line naming the file and the array.
//
// Arrays come back as safetensors.Tensor values, the type kiln's other
// tensor files use. Sizes are checked before anything is allocated: no
// array larger than ir.MaxTensorBytes, nor than the memory available
// (sysmem.Check), nor than the bytes the file actually holds.
package npy

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/internal/sysmem"
	"github.com/kilnml/kiln/ir"
)

// magic starts every .npy file.
const magic = "\x93NUMPY"

// MaxHeader is the longest .npy header read, in bytes. NumPy itself reads
// headers of at most 10000 bytes by default; a rank-64 shape fits easily.
const MaxHeader = 1 << 16

// dtypes maps the NumPy type strings kiln reads to its dtypes.
var dtypes = map[string]ir.DType{
	"<f4": ir.F32, "<f8": ir.F64, "<i4": ir.I32, "<i8": ir.I64, "|b1": ir.Bool,
}

// supported lists dtypes for error messages.
const supported = "'<f4', '<f8', '<i4', '<i8' or '|b1'"

// Read reads one .npy array from r; name (the array's name, or the file's)
// is the Tensor's name and prefixes every error. r must hold nothing after
// the array's data.
func Read(r io.Reader, name string) (safetensors.Tensor, error) {
	t, err := read(r, name, -1)
	if err != nil {
		return t, fmt.Errorf("%s: %v", name, err)
	}
	return t, nil
}

// read reads one .npy array; size is the stream's length when known (a
// file's, an archive member's declared size), else -1.
func read(r io.Reader, name string, size int64) (safetensors.Tensor, error) {
	t := safetensors.Tensor{Name: name}
	var pre [10]byte
	n, err := io.ReadFull(r, pre[:8])
	if err != nil || string(pre[:6]) != magic {
		return t, fmt.Errorf("expected a .npy array (starting with \"\\x93NUMPY\"), found %q", pre[:n])
	}
	major, minor := pre[6], pre[7]
	var hlen, start int
	switch major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return t, fmt.Errorf("the header's length: %v", truncated(err))
		}
		hlen, start = int(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return t, fmt.Errorf("the header's length: %v", truncated(err))
		}
		u := binary.LittleEndian.Uint32(l[:])
		if u > MaxHeader {
			return t, fmt.Errorf("expected a header of at most %d bytes, found %d", MaxHeader, u)
		}
		hlen, start = int(u), 12
	default:
		return t, fmt.Errorf("expected format version 1.0, 2.0 or 3.0, found %d.%d", major, minor)
	}
	if minor != 0 {
		return t, fmt.Errorf("expected format version 1.0, 2.0 or 3.0, found %d.%d", major, minor)
	}
	if size >= 0 && int64(start+hlen) > size {
		return t, fmt.Errorf("the header of %d bytes runs past the end of the data (%d bytes)", hlen, size)
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return t, fmt.Errorf("the header: %v", truncated(err))
	}
	h, err := parseHeader(string(hb))
	if err != nil {
		return t, fmt.Errorf("header: %v", err)
	}
	dt, ok := dtypes[h.descr]
	if h.descr == "<b1" {
		dt, ok = ir.Bool, true
	}
	if !ok {
		return t, fmt.Errorf("expected dtype %s, found %s", supported, quote(h.descr))
	}
	if h.fortran {
		return t, fmt.Errorf("expected C order, found a Fortran-order array (numpy.ascontiguousarray writes C order)")
	}
	t.Type = ir.Type{DType: dt, Shape: h.shape}
	nb, err := t.Type.BytesChecked()
	if err != nil {
		return t, err
	}
	if size >= 0 && int64(start+hlen)+int64(nb) != size {
		return t, fmt.Errorf("%s needs %d bytes of data, found %d", t.Type, nb, size-int64(start+hlen))
	}
	if err := sysmem.Check("array "+t.Type.String(), int64(nb)); err != nil {
		return t, err
	}
	// Read in slices so that a short stream is found before it all is
	// allocated when the size is not known.
	data := make([]byte, 0, min(nb, 1<<20))
	for len(data) < nb {
		k := min(nb-len(data), max(len(data), 1<<20))
		data = append(data, make([]byte, k)...)
		if _, err := io.ReadFull(r, data[len(data)-k:]); err != nil {
			return t, fmt.Errorf("%s needs %d bytes of data, found fewer: %v", t.Type, nb, truncated(err))
		}
	}
	var extra [1]byte
	if k, _ := r.Read(extra[:]); k > 0 {
		return t, fmt.Errorf("%s needs %d bytes of data, found more", t.Type, nb)
	}
	t.Data = data
	return t, nil
}

// truncated turns io.ErrUnexpectedEOF and io.EOF into a message.
func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the data ends early")
	}
	return err
}

// quote quotes s for a message, cut to ir.MaxQuoted characters.
func quote(s string) string { return strconv.Quote(ir.Excerpt(s)) }

// ReadFile reads the .npy file at path; the array is named after the file.
func ReadFile(path string) (safetensors.Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return safetensors.Tensor{}, err // *fs.PathError names the file
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return safetensors.Tensor{}, err
	}
	t, err := read(bufio.NewReader(f), path, fi.Size())
	if err != nil {
		return t, fmt.Errorf("%s: %v", path, err)
	}
	return t, nil
}

// ReadNPZ reads every array of the .npz archive in ra (size bytes long), in
// the archive's order; each is named as its member without ".npy", as
// numpy.load names them. name prefixes every error.
func ReadNPZ(ra io.ReaderAt, size int64, name string) ([]safetensors.Tensor, error) {
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return nil, fmt.Errorf("%s: expected a .npz file (a zip archive of .npy arrays): %v", name, err)
	}
	var out []safetensors.Tensor
	seen := map[string]bool{}
	for _, f := range zr.File {
		an, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok {
			return nil, fmt.Errorf("%s: member %s: expected a .npy array, found another file", name, quote(f.Name))
		}
		if seen[an] {
			return nil, fmt.Errorf("%s: array %s appears twice", name, quote(an))
		}
		seen[an] = true
		if f.Method != zip.Store && f.Method != zip.Deflate {
			return nil, fmt.Errorf("%s: array %s: expected a stored or deflated member, found compression method %d", name, quote(an), f.Method)
		}
		if f.UncompressedSize64 > ir.MaxTensorBytes+MaxHeader {
			return nil, fmt.Errorf("%s: array %s: the member declares %d bytes, more than kiln reads (ir.MaxTensorBytes)", name, quote(an), f.UncompressedSize64)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%s: array %s: %v", name, quote(an), err)
		}
		// The declared size bounds the read; the zip reader checks it and
		// the CRC at the end.
		t, err := read(rc, an, int64(f.UncompressedSize64))
		if err == nil {
			// Reach the end, so the zip reader checks the CRC.
			if _, cerr := io.Copy(io.Discard, rc); cerr != nil {
				err = cerr
			}
		}
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: array %s: %v", name, quote(an), err)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: expected at least one array, found none", name)
	}
	return out, nil
}

// ReadNPZFile reads the .npz file at path with ReadNPZ.
func ReadNPZFile(path string) ([]safetensors.Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return ReadNPZ(f, fi.Size(), path)
}

// header is what a .npy header says.
type header struct {
	descr   string
	fortran bool
	shape   ir.Shape
}

// parseHeader parses a .npy header: a Python dict literal with the keys
// 'descr' (a type string), 'fortran_order' (True or False) and 'shape' (a
// tuple of integers), padded with spaces and ending in a newline. (Version
// 3.0 differs from 2.0 only in allowing UTF-8, which only structured
// dtypes use, and those are refused.)
func parseHeader(s string) (header, error) {
	var h header
	p := &parser{s: strings.TrimRight(s, " \n\x00")}
	if !p.eat('{') {
		return h, fmt.Errorf("expected a dict {'descr': ..., 'fortran_order': ..., 'shape': ...}, found %s", quote(s))
	}
	got := map[string]bool{}
	for !p.eat('}') {
		key, err := p.str()
		if err != nil {
			return h, err
		}
		if !p.eat(':') {
			return h, fmt.Errorf("expected ':' after key %s", quote(key))
		}
		switch key {
		case "descr":
			if p.peek() != '\'' && p.peek() != '"' {
				return h, fmt.Errorf("expected dtype %s, found a structured dtype", supported)
			}
			if h.descr, err = p.str(); err != nil {
				return h, err
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				h.fortran = true
			case p.word("False"):
			default:
				return h, fmt.Errorf("'fortran_order': expected True or False, found %s", quote(p.rest()))
			}
		case "shape":
			if h.shape, err = p.tuple(); err != nil {
				return h, fmt.Errorf("'shape': %v", err)
			}
		default:
			return h, fmt.Errorf("expected the keys 'descr', 'fortran_order' and 'shape', found %s", quote(key))
		}
		if got[key] {
			return h, fmt.Errorf("key %s appears twice", quote(key))
		}
		got[key] = true
		if !p.eat(',') && p.peek() != '}' {
			return h, fmt.Errorf("expected ',' or '}' after %s's value, found %s", quote(key), quote(p.rest()))
		}
	}
	if p.rest() != "" {
		return h, fmt.Errorf("expected the end after '}', found %s", quote(p.rest()))
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !got[k] {
			return h, fmt.Errorf("expected the key '%s', found none", k)
		}
	}
	return h, nil
}

// parser scans a header's Python literal.
type parser struct {
	s string
	i int
}

func (p *parser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *parser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *parser) rest() string { p.space(); return p.s[p.i:] }

func (p *parser) eat(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) word(w string) bool {
	if strings.HasPrefix(p.rest(), w) {
		p.i += len(w)
		return true
	}
	return false
}

// str reads a quoted string without escapes, as NumPy writes keys and
// type strings.
func (p *parser) str() (string, error) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", fmt.Errorf("expected a quoted string, found %s", quote(p.rest()))
	}
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("expected a closing quote, found %s", quote(p.rest()))
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsRune(v, '\\') {
		return "", fmt.Errorf("expected a string without escapes, found %s", quote(v))
	}
	p.i += end + 2
	return v, nil
}

// tuple reads a tuple of non-negative integers: (), (3,), (3, 4).
func (p *parser) tuple() (ir.Shape, error) {
	if !p.eat('(') {
		return nil, fmt.Errorf("expected a tuple of integers, found %s", quote(p.rest()))
	}
	shape := ir.Shape{}
	for !p.eat(')') {
		p.space()
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		d, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
		if err != nil || d > ir.MaxTensorBytes {
			return nil, fmt.Errorf("expected a dimension from 0 to 2^40, found %s", quote(p.rest()))
		}
		if len(shape) == ir.MaxRank {
			return nil, fmt.Errorf("expected at most %d dimensions, found more", ir.MaxRank)
		}
		shape = append(shape, int(d))
		p.i = j
		if !p.eat(',') && p.peek() != ')' {
			return nil, fmt.Errorf("expected ',' or ')' after a dimension, found %s", quote(p.rest()))
		}
	}
	return shape, nil
}

// Encode returns t as a version 1.0 .npy file, the inverse of Read, with
// the header NumPy writes: tests and tools write arrays with it.
func Encode(t safetensors.Tensor) ([]byte, error) {
	descr := ""
	for k, v := range dtypes {
		if v == t.Type.DType {
			descr = k
		}
	}
	if descr == "" {
		return nil, fmt.Errorf("npy: tensor %s: dtype %s has no .npy form kiln writes", quote(t.Name), t.Type.DType)
	}
	if n, err := t.Type.BytesChecked(); err != nil || n != len(t.Data) {
		return nil, fmt.Errorf("npy: tensor %s: %s needs %d bytes, found %d", quote(t.Name), ir.Excerpt(t.Type.String()), n, len(t.Data))
	}
	var dims []string
	for _, d := range t.Type.Shape {
		dims = append(dims, strconv.Itoa(d))
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape)
	// Pad with spaces so that the data starts on a multiple of 64 bytes, as
	// NumPy does. A rank-64 header of 2^40 dims is about 1 KiB: the 16-bit
	// length of version 1.0 always holds it.
	h += strings.Repeat(" ", (64-(10+len(h)+1)%64)%64) + "\n"
	b := make([]byte, 0, 10+len(h)+len(t.Data))
	b = append(b, magic+"\x01\x00"...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h)))
	b = append(b, h...)
	return append(b, t.Data...), nil
}
