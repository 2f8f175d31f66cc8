package dataset

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestKAN2D(t *testing.T) {
	d, err := KAN2D(500, 7)
	if err != nil {
		t.Fatal(err)
	}
	if d.N != 500 || d.D != 2 || d.Targets() != 1 || len(d.X) != 1000 || len(d.R) != 500 || d.Y != nil || d.Vocab != 0 {
		t.Fatalf("shape: N %d D %d K %d, %d features, %d targets, labels %v", d.N, d.D, d.Targets(), len(d.X), len(d.R), d.Y != nil)
	}
	lo, hi := [2]float64{1, 1}, [2]float64{-1, -1}
	for i := range d.N {
		x, y := d.X[2*i], d.X[2*i+1]
		for j, v := range []float64{x, y} {
			if v < -1 || v >= 1 {
				t.Fatalf("row %d: feature %d is %g, outside [-1,1)", i, j, v)
			}
			lo[j], hi[j] = min(lo[j], v), max(hi[j], v)
		}
		if want := math.Exp(math.Sin(math.Pi*x) + y*y); d.R[i] != want {
			t.Fatalf("row %d: target %g, want exp(sin(π·%g)+%g²) = %g", i, d.R[i], x, y, want)
		}
	}
	// 500 uniform points come within 0.05 of every edge.
	for j := range 2 {
		if lo[j] > -0.95 || hi[j] < 0.95 {
			t.Errorf("feature %d spans [%g, %g], not most of [-1,1]", j, lo[j], hi[j])
		}
	}
	e, _ := KAN2D(500, 7)
	f, _ := KAN2D(500, 8)
	if !slices.Equal(d.X, e.X) || !slices.Equal(d.R, e.R) {
		t.Error("KAN2D is not deterministic in its seed")
	}
	if slices.Equal(d.X, f.X) {
		t.Error("seeds 7 and 8 give the same points")
	}
	// The first point is pinned: a change silently changes every experiment.
	if got := d.X[:2]; got[0] != 0.2358305073310618 || got[1] != 0.6052705244466252 {
		t.Errorf("first point %v changed", got)
	}
	if _, err := KAN2D(0, 1); err == nil || !strings.Contains(err.Error(), "must be positive, found 0") {
		t.Errorf("KAN2D(0): error %v", err)
	}
}

func TestReverse(t *testing.T) {
	d, err := Reverse(300, 6, 5, 3)
	if err != nil {
		t.Fatal(err)
	}
	if d.N != 300 || d.D != 6 || d.Targets() != 6 || d.Classes != 5 || d.Vocab != 5 || d.R != nil || len(d.Y) != 1800 {
		t.Fatalf("shape: N %d D %d K %d Classes %d Vocab %d", d.N, d.D, d.Targets(), d.Classes, d.Vocab)
	}
	counts := make([]int, 5)
	for i := range d.N {
		for j := range 6 {
			v := d.X[i*6+j]
			if v != math.Trunc(v) || v < 0 || v >= 5 {
				t.Fatalf("row %d: token %g is not in [0,5)", i, v)
			}
			counts[int(v)]++
			if d.Y[i*6+5-j] != int64(v) {
				t.Fatalf("row %d: labels %v are not the reversal of %v", i, d.Y[i*6:i*6+6], d.X[i*6:i*6+6])
			}
		}
	}
	for v, c := range counts {
		if c < 1800/5*8/10 || c > 1800/5*12/10 {
			t.Errorf("token %d appears %d times in 1800, not about 360", v, c)
		}
	}
	e, _ := Reverse(300, 6, 5, 3)
	if !slices.Equal(d.X, e.X) {
		t.Error("Reverse is not deterministic in its seed")
	}
	for _, tc := range []struct {
		n, length, vocab int
		want             string
	}{{0, 4, 4, "rows must be positive, found 0"}, {4, 0, 4, "length must be positive, found 0"}, {4, 4, 1, "at least 2 tokens, found 1"}} {
		if _, err := Reverse(tc.n, tc.length, tc.vocab, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Reverse(%d, %d, %d): error %v, want %q", tc.n, tc.length, tc.vocab, err, tc.want)
		}
	}
}

// TestSplitTargets checks that splitting, shuffling and copying rows keep
// each row's K targets with its features, for labels and float targets.
func TestSplitTargets(t *testing.T) {
	seqs, _ := Reverse(40, 3, 7, 1)
	points, _ := KAN2D(40, 1)
	for _, d := range []*Dataset{seqs, points} {
		train, held := d.Split(0.25, 5)
		if train.K != d.K || train.Vocab != d.Vocab || train.N+held.N != d.N {
			t.Fatalf("split lost K, Vocab or rows: %+v", train)
		}
		train.Shuffle(2)
		k := d.Targets()
		x, y, r := make([]float64, 2*d.D), make([]int64, 2*k), make([]float64, 2*k)
		for _, part := range []*Dataset{train, held} {
			for i := range part.N {
				part.CopyRow(1, i, x, y, r)
				row := x[d.D : 2*d.D]
				switch {
				case d.Y != nil:
					for j := range k {
						if y[k+j] != int64(row[k-1-j]) {
							t.Fatalf("row %d: labels %v do not reverse %v", i, y[k:], row)
						}
					}
				default:
					if r[1] != KAN2DFunc(row[0], row[1]) {
						t.Fatalf("row %d: target %g is not f(%v)", i, r[1], row)
					}
				}
			}
		}
	}
}
