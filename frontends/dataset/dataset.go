// Package dataset holds the small data sets kiln's training examples and
// tests need, and provides their deterministic splitting, shuffling,
// standardization and batching. A data set is a table of rows: D features
// per row (floats, or integer tokens) and K targets per row (integer labels
// or float values). ReadCSV loads classification data (float features and an
// integer label per row; a float target with CSVOptions.FloatTargets). Its first row is a header when some field is not a
// number and every such field is a name (starts with a letter or '_'), so a
// mistyped number such as "1O" is reported, not skipped; CSVOptions.Header
// says yes or no instead. LoadArrays reads named arrays from .safetensors
// and .npz files (see FromArrays). KAN2D and Reverse generate synthetic regression
// and sequence data from a seed.
//
// The package embeds the UCI handwritten digits data (see Digits and
// digits/README.md for its attribution), so that examples and tests never
// read files outside the module at run time.
package dataset

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Dataset is a table of N rows, each of D features and K targets. The
// targets are integer labels in Y (a class per row, or one per token of a
// sequence) or float values in R (regression); exactly one of the two is
// set. K = 0 counts as 1, so a literal with one label per row may omit it.
type Dataset struct {
	X       []float64 // N*D features, row-major; integer token ids when Vocab > 0
	Y       []int64   // N*K labels, each in [0, Classes); nil when the targets are R
	R       []float64 // N*K float targets; nil when the targets are Y
	N, D    int       // rows and features per row
	K       int       // targets per row (0 means 1)
	Classes int       // max label + 1 (0 for float targets)
	Vocab   int       // when > 0, the features are tokens in [0, Vocab): not to be standardized
}

// Targets returns K, the number of targets per row, at least 1.
func (d *Dataset) Targets() int { return max(d.K, 1) }

// maxLabel bounds labels so that Classes stays a sensible size.
const maxLabel = math.MaxInt32

// DefaultMaxLine is the longest CSV line, in bytes, that ReadCSV accepts
// when CSVOptions.MaxLine is 0: a file without newlines is refused once a
// line grows past it, instead of being read into memory whole.
const DefaultMaxLine = 16 << 20

// Header says whether a CSV file's first non-blank row is a header.
type Header int

const (
	// HeaderAuto decides by the first row's fields: it is a header when
	// some field is not a number and every field that is not a number is a
	// name, one that starts with a letter or '_' ("label", "x_1"). A row
	// such as "1.5,1O,3" is data, whose typo is then reported.
	HeaderAuto Header = iota
	// HeaderYes takes the first non-blank row as a header, whatever it holds.
	HeaderYes
	// HeaderNo takes every row as data.
	HeaderNo
)

// ParseHeader reads a Header from "auto", "yes" or "no".
func ParseHeader(s string) (Header, error) {
	switch s {
	case "auto":
		return HeaderAuto, nil
	case "yes":
		return HeaderYes, nil
	case "no":
		return HeaderNo, nil
	}
	return 0, fmt.Errorf("expected auto, yes or no, found %q", clip(s))
}

// CSVOptions configures ReadCSVWith; the zero value gives ReadCSV.
type CSVOptions struct {
	Header  Header // whether the first row is a header (HeaderAuto by default)
	Classes int    // when > 0, every label must be below it: the classes of the model to be trained
	MaxLine int    // the longest line accepted, in bytes; 0 means DefaultMaxLine
	// FloatTargets reads the last column as a float target (regression,
	// into Dataset.R) instead of an integer label.
	FloatTargets bool
}

// ReadCSV reads a data set from comma-separated text with the default
// CSVOptions: ReadCSVWith(r, name, CSVOptions{}).
func ReadCSV(r io.Reader, name string) (*Dataset, error) {
	return ReadCSVWith(r, name, CSVOptions{})
}

// ReadCSVWith reads a data set from comma-separated text. Each row holds D
// numbers followed by an integer label in the last column (a float target
// with o.FloatTargets); every row must
// have the same number of columns, and there must be at least one feature.
// The first non-blank row may be a header, as o.Header says (see
// HeaderAuto for the rule it applies by default); a header is skipped but
// must have the same number of columns as the data. Blank lines are
// skipped, spaces around fields and a trailing CR are ignored. With
// o.Classes > 0 a label of o.Classes or more is refused. A line longer
// than o.MaxLine bytes is refused. If the stream starts with the gzip magic
// bytes it is decompressed first. Errors have the form "name:line:
// message", with line counted in the (decompressed) text from 1.
func ReadCSVWith(r io.Reader, name string, o CSVOptions) (*Dataset, error) {
	maxLine := o.MaxLine
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %v", name, err)
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}

	d := &Dataset{}
	cols := 0            // columns per row, once known
	headerLine := 0      // line of the header row, if any
	sawFirstRow := false // whether the first non-blank row has been seen
	var fields []string
	var buf []byte
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br, buf, maxLine)
		buf = line
		if err == errLineTooLong {
			return nil, fmt.Errorf("%s:%d: the line is longer than %d bytes (a file without line breaks?)", name, lineNo, maxLine)
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s:%d: reading: %v", name, lineNo, err)
		}
		if len(line) == 0 && err == io.EOF {
			break
		}
		text := strings.TrimSpace(string(line))
		if text != "" {
			fields = splitFields(fields[:0], text)
			if !sawFirstRow {
				sawFirstRow = true
				if o.Header == HeaderYes || (o.Header == HeaderAuto && isHeader(fields)) {
					if len(fields) < 2 {
						return nil, fmt.Errorf("%s:%d: header: expected at least 2 columns (features and a label), found %d", name, lineNo, len(fields))
					}
					cols, headerLine = len(fields), lineNo
					d.D = cols - 1
					if err == io.EOF {
						break
					}
					continue
				}
			}
			if cols == 0 {
				if len(fields) < 2 {
					return nil, fmt.Errorf("%s:%d: expected at least 2 columns (features and a label), found %d", name, lineNo, len(fields))
				}
				cols = len(fields)
				d.D = cols - 1
			}
			if len(fields) != cols {
				what := ""
				if headerLine != 0 {
					what = fmt.Sprintf(", as in the header on line %d", headerLine)
				}
				return nil, fmt.Errorf("%s:%d: expected %d columns (%d features and a label%s), found %d",
					name, lineNo, cols, cols-1, what, len(fields))
			}
			if err := d.appendRow(fields, o.Classes, o.FloatTargets); err != nil {
				if d.N == 0 && headerLine == 0 && o.Header == HeaderAuto {
					return nil, fmt.Errorf("%s:%d: %v (the first row is no header: a header's fields are numbers or names, which start with a letter or '_')", name, lineNo, err)
				}
				return nil, fmt.Errorf("%s:%d: %v", name, lineNo, err)
			}
		}
		if err == io.EOF {
			break
		}
	}
	if d.N == 0 {
		return nil, fmt.Errorf("%s: no data rows", name)
	}
	return d, nil
}

// errLineTooLong is readLine's error for a line over its limit.
var errLineTooLong = errors.New("line too long")

// readLine reads one line, its newline included, into buf[:0] and returns
// it; it returns errLineTooLong once the line passes limit bytes, having
// read no more than about limit bytes of it, and io.EOF with the last line
// when it has no newline.
func readLine(br *bufio.Reader, buf []byte, limit int) ([]byte, error) {
	buf = buf[:0]
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > limit {
			return buf, errLineTooLong
		}
		buf = append(buf, frag...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

// splitFields splits a CSV line on commas and trims each field.
func splitFields(dst []string, line string) []string {
	for {
		i := strings.IndexByte(line, ',')
		if i < 0 {
			return append(dst, strings.TrimSpace(line))
		}
		dst = append(dst, strings.TrimSpace(line[:i]))
		line = line[i+1:]
	}
}

// isHeader applies HeaderAuto's rule to the first row's fields: some field
// is not a number, and every field that is not a number is a name.
func isHeader(fields []string) bool {
	names := 0
	for _, f := range fields {
		if _, err := strconv.ParseFloat(f, 64); err == nil {
			continue
		}
		if !isName(f) {
			return false
		}
		names++
	}
	return names > 0
}

// isName reports whether a field starts with a letter or '_', as a column
// name does and a mistyped number ("1O", "", "-") does not.
func isName(f string) bool {
	r, _ := utf8.DecodeRuneInString(f)
	return r == '_' || unicode.IsLetter(r)
}

// clip returns s, cut to at most 80 bytes (with "..." appended) for quoting
// in a message.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return strings.ToValidUTF8(s[:77], "") + "..."
}

// appendRow parses one data row (features then label) onto d; with classes
// > 0 the label must be below it. With float, the last column is a float
// target instead.
func (d *Dataset) appendRow(fields []string, classes int, float bool) error {
	last := len(fields) - 1
	for j, f := range fields[:last] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return fmt.Errorf("column %d: expected a number, found %q", j+1, clip(f))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("column %d: expected a finite number, found %q", j+1, clip(f))
		}
		d.X = append(d.X, v)
	}
	f := fields[last]
	if float {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("target (column %d): expected a finite number, found %q", last+1, clip(f))
		}
		if d.R == nil {
			d.R = []float64{} // float targets even before the first row
		}
		d.R = append(d.R, v)
		d.N++
		return nil
	}
	label, ok := parseLabel(f)
	if !ok {
		return fmt.Errorf("label (column %d): expected an integer from 0 to %d, found %q", last+1, maxLabel, clip(f))
	}
	if classes > 0 && label >= int64(classes) {
		return fmt.Errorf("label (column %d): expected an integer from 0 to %d (the model has %d classes), found %q", last+1, classes-1, classes, clip(f))
	}
	d.Y = append(d.Y, label)
	d.N++
	d.Classes = max(d.Classes, int(label)+1)
	return nil
}

// parseLabel parses a class label: an integer in [0, maxLabel], possibly
// written with a zero fraction ("3.0").
func parseLabel(s string) (int64, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, n >= 0 && n <= maxLabel
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != math.Trunc(v) || v < 0 || v > maxLabel { // NaN and ±Inf fail too
		return 0, false
	}
	return int64(v), true
}

// LoadCSV reads the data set in the file at path with ReadCSV; the file may
// be gzip-compressed. Errors name the file.
func LoadCSV(path string) (*Dataset, error) {
	return LoadCSVWith(path, CSVOptions{})
}

// LoadCSVWith reads the data set in the file at path with ReadCSVWith; the
// file may be gzip-compressed. Errors name the file.
func LoadCSVWith(path string, o CSVOptions) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *fs.PathError already names the file
	}
	defer f.Close()
	return ReadCSVWith(f, path, o)
}

// permutation returns a pseudo-random permutation of [0, n) determined by
// seed alone: a Fisher–Yates shuffle driven by math/rand/v2's PCG seeded
// with (seed, 0). The bounded draws are computed here rather than by
// rand.Rand, so that the order does not depend on the Go release.
func permutation(n int, seed uint64) []int {
	src := rand.NewPCG(seed, 0)
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := int(uint64n(src, uint64(i+1)))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// uint64n returns a uniform value in [0, n), n > 0, by Lemire's
// multiply-and-reject method.
func uint64n(src *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}

// rows returns a new data set holding d's rows idx, in that order, with
// d's number of classes, targets per row and vocabulary.
func (d *Dataset) rows(idx []int) *Dataset {
	k := d.Targets()
	out := &Dataset{
		X:       make([]float64, len(idx)*d.D),
		N:       len(idx),
		D:       d.D,
		K:       d.K,
		Classes: d.Classes,
		Vocab:   d.Vocab,
	}
	if d.Y != nil {
		out.Y = make([]int64, len(idx)*k)
	}
	if d.R != nil {
		out.R = make([]float64, len(idx)*k)
	}
	for i, r := range idx {
		copy(out.X[i*d.D:(i+1)*d.D], d.X[r*d.D:(r+1)*d.D])
		if d.Y != nil {
			copy(out.Y[i*k:(i+1)*k], d.Y[r*k:(r+1)*k])
		}
		if d.R != nil {
			copy(out.R[i*k:(i+1)*k], d.R[r*k:(r+1)*k])
		}
	}
	return out
}

// Split shuffles the rows deterministically by seed (the order Shuffle(seed)
// would give) and returns the first rows as train and the last
// round(heldOutFraction*N) rows as heldOut. Both are copies, d is left
// unchanged, and both keep d's Classes so that models sized by it fit
// either part. It panics unless 0 <= heldOutFraction <= 1.
func (d *Dataset) Split(heldOutFraction float64, seed uint64) (train, heldOut *Dataset) {
	if !(heldOutFraction >= 0 && heldOutFraction <= 1) {
		panic(fmt.Sprintf("dataset: Split: held-out fraction %v is not in [0, 1]", heldOutFraction))
	}
	p := permutation(d.N, seed)
	nHeld := int(math.Round(heldOutFraction * float64(d.N)))
	return d.rows(p[:d.N-nHeld]), d.rows(p[d.N-nHeld:])
}

// Shuffle reorders the rows in place, deterministically by seed.
func (d *Dataset) Shuffle(seed uint64) {
	s := d.rows(permutation(d.N, seed))
	copy(d.X, s.X)
	copy(d.Y, s.Y)
	copy(d.R, s.R)
}

// Standardize rescales every feature in place to zero mean and unit
// variance over the rows of d, and returns the per-feature mean and
// standard deviation used (population standard deviation; 1 for a feature
// that does not vary, which is then only centred). Apply the same transform
// to other data with ApplyStandardize.
func (d *Dataset) Standardize() (mean, std []float64) {
	mean = make([]float64, d.D)
	std = make([]float64, d.D)
	if d.N > 0 {
		for i := range d.N {
			for j, v := range d.X[i*d.D : (i+1)*d.D] {
				mean[j] += v
			}
		}
		for j := range mean {
			mean[j] /= float64(d.N)
		}
		for i := range d.N {
			for j, v := range d.X[i*d.D : (i+1)*d.D] {
				dv := v - mean[j]
				std[j] += dv * dv
			}
		}
	}
	for j := range std {
		if d.N > 0 {
			std[j] = math.Sqrt(std[j] / float64(d.N))
		}
		// A feature that does not vary in these rows is only centred
		// (std 1, as scikit-learn does): dividing by a tiny std would turn
		// any variation in other data into values near 1e8.
		if std[j] < 1e-8 {
			std[j] = 1
		}
	}
	d.ApplyStandardize(mean, std)
	return mean, std
}

// ApplyStandardize replaces every feature x[j] by (x[j]-mean[j])/std[j] in
// place, as Standardize does with the statistics of its own rows. It panics
// unless mean and std have D entries.
func (d *Dataset) ApplyStandardize(mean, std []float64) {
	if len(mean) != d.D || len(std) != d.D {
		panic(fmt.Sprintf("dataset: ApplyStandardize: %d means and %d stds for %d features", len(mean), len(std), d.D))
	}
	for i := range d.N {
		row := d.X[i*d.D : (i+1)*d.D]
		for j := range row {
			row[j] = (row[j] - mean[j]) / std[j]
		}
	}
}

// NumBatches returns the number of full batches of batchSize rows; a
// trailing partial batch is not counted. It panics unless batchSize > 0.
func (d *Dataset) NumBatches(batchSize int) int {
	if batchSize <= 0 {
		panic(fmt.Sprintf("dataset: NumBatches: batch size %d is not positive", batchSize))
	}
	return d.N / batchSize
}

// Batch copies rows [i*batchSize, (i+1)*batchSize) into the caller's
// buffers: their features into x[:batchSize*D] and their labels into
// y[:batchSize*K] (y is not used when the targets are float; see BatchR).
// It does not allocate. It panics if the batch is not a full batch within d
// or a buffer is too short.
func (d *Dataset) Batch(i, batchSize int, x []float64, y []int64) {
	k := d.Targets()
	if batchSize <= 0 || i < 0 || i >= d.NumBatches(batchSize) {
		panic(fmt.Sprintf("dataset: Batch: batch %d of size %d is not a full batch of %d rows", i, batchSize, d.N))
	}
	if len(x) < batchSize*d.D || (d.Y != nil && len(y) < batchSize*k) {
		panic(fmt.Sprintf("dataset: Batch: buffers hold %d features and %d labels, need %d and %d",
			len(x), len(y), batchSize*d.D, batchSize*k))
	}
	lo := i * batchSize
	copy(x[:batchSize*d.D], d.X[lo*d.D:(lo+batchSize)*d.D])
	if d.Y != nil {
		copy(y[:batchSize*k], d.Y[lo*k:(lo+batchSize)*k])
	}
}

// CopyRow copies row src of d to row dst of the caller's batch buffers:
// its features into x[dst*D:], its labels into y[dst*K:] when the targets
// are labels and its float targets into r[dst*K:] when they are float.
// Trainers use it to fill a padded batch. It panics when src is not a row
// of d or a buffer is too short.
func (d *Dataset) CopyRow(dst, src int, x []float64, y []int64, r []float64) {
	if src < 0 || src >= d.N {
		panic(fmt.Sprintf("dataset: CopyRow: row %d of %d rows", src, d.N))
	}
	k := d.Targets()
	copy(x[dst*d.D:(dst+1)*d.D], d.X[src*d.D:(src+1)*d.D])
	if d.Y != nil {
		copy(y[dst*k:(dst+1)*k], d.Y[src*k:(src+1)*k])
	}
	if d.R != nil {
		copy(r[dst*k:(dst+1)*k], d.R[src*k:(src+1)*k])
	}
}
