package dist

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"github.com/kilnml/kiln/ir"
)

// runRanks runs f on every rank of a Local job of n ranks and waits.
func runRanks(n int, f func(c *Comm)) {
	var wg sync.WaitGroup
	for _, t := range Local(n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(NewComm(t))
		}()
	}
	wg.Wait()
}

// rankData returns rank r's n float32s for a test: values of widely
// different magnitudes, so that the order of a sum changes its bits.
func rankData(r, n int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(r), 7))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
	}
	return x
}

func f32Bytes(x []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
}

// TestAllreduceSumRankOrder checks that every rank ends with the sum in
// rank order, ((x0 + x1) + x2) + ..., bit for bit, for lengths that do and
// do not divide evenly into shards.
func TestAllreduceSumRankOrder(t *testing.T) {
	for _, ranks := range []int{1, 2, 3, 4} {
		for _, n := range []int{1, 5, 64, 1000, 4099} {
			want := rankData(0, n)
			for r := 1; r < ranks; r++ {
				for i, v := range rankData(r, n) {
					want[i] += v
				}
			}
			got := make([][]float32, ranks)
			runRanks(ranks, func(c *Comm) {
				x := rankData(c.Rank(), n)
				if err := c.AllreduceSum(f32Bytes(x), ir.F32); err != nil {
					t.Error(err)
				}
				got[c.Rank()] = x
			})
			for r := range got {
				for i := range want {
					if math.Float32bits(got[r][i]) != math.Float32bits(want[i]) {
						t.Fatalf("ranks %d, n %d: rank %d element %d = %v, want %v", ranks, n, r, i, got[r][i], want[i])
					}
				}
			}
		}
	}
}

// TestReduceScatterAllgather checks that each rank's shard is its part of
// the rank-order sum and that gathering the shards restores the whole.
func TestReduceScatterAllgather(t *testing.T) {
	const ranks, n = 3, 10
	want := rankData(0, n)
	for r := 1; r < ranks; r++ {
		for i, v := range rankData(r, n) {
			want[i] += v
		}
	}
	runRanks(ranks, func(c *Comm) {
		x := rankData(c.Rank(), n)
		shard := make([]float32, ir.ShardLen(n, ranks))
		if err := c.ReduceScatter(f32Bytes(x), ir.F32, f32Bytes(shard)); err != nil {
			t.Error(err)
			return
		}
		lo, hi := ShardRange(n, ranks, c.Rank())
		for i := lo; i < hi; i++ {
			if shard[i-lo] != want[i] {
				t.Errorf("rank %d shard element %d = %v, want %v", c.Rank(), i, shard[i-lo], want[i])
			}
		}
		all := make([]float32, n)
		if err := c.Allgather(f32Bytes(shard), f32Bytes(all)); err != nil {
			t.Error(err)
			return
		}
		for i := range want {
			if all[i] != want[i] {
				t.Errorf("rank %d gathered element %d = %v, want %v", c.Rank(), i, all[i], want[i])
			}
		}
	})
}

func TestShardRange(t *testing.T) {
	for _, tc := range []struct{ n, ranks, r, lo, hi int }{
		{10, 3, 0, 0, 4}, {10, 3, 1, 4, 8}, {10, 3, 2, 8, 10},
		{2, 4, 2, 2, 2}, {2, 4, 3, 2, 2}, {8, 4, 3, 6, 8},
	} {
		if lo, hi := ShardRange(tc.n, tc.ranks, tc.r); lo != tc.lo || hi != tc.hi {
			t.Errorf("ShardRange(%d, %d, %d) = %d, %d; want %d, %d", tc.n, tc.ranks, tc.r, lo, hi, tc.lo, tc.hi)
		}
	}
}

func TestBcastAndAbort(t *testing.T) {
	runRanks(3, func(c *Comm) {
		b := []byte{byte(c.Rank()), 9}
		if err := c.Bcast(b, 2); err != nil {
			t.Error(err)
		}
		if b[0] != 2 {
			t.Errorf("rank %d after bcast from 2: %v", c.Rank(), b)
		}
	})
	var errs [2]error
	runRanks(2, func(c *Comm) {
		if c.Rank() == 1 {
			c.Transport().Abort(1, "rank 1: test failure")
		}
		errs[c.Rank()] = c.AllreduceSum(make([]byte, 8), ir.F32)
	})
	if errs[0] == nil {
		t.Fatal("rank 0's collective after rank 1 aborted returned no error")
	}
	if got := errs[0].Error(); got != "rank 1 aborted the job (exit code 1): rank 1: test failure" {
		t.Errorf("error = %q", got)
	}
}
