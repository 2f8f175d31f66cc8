package dist

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/kilnml/kiln/ir"
)

// Comm runs kiln's collectives on a transport: sums over the ranks in
// rank order, shards and gathers. Its methods may be called from any
// goroutine, one at a time in the same order on every rank; a mutex keeps
// calls from overlapping.
type Comm struct {
	t       Transport
	mu      sync.Mutex
	scratch []byte
}

// NewComm returns a Comm on t.
func NewComm(t Transport) *Comm { return &Comm{t: t} }

// Rank is this process's rank.
func (c *Comm) Rank() int { return c.t.Rank() }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.t.Size() }

// Transport returns the transport c runs on.
func (c *Comm) Transport() Transport { return c.t }

// Check reports an error when a plan compiled for ranks runs on c.
func (c *Comm) Check(what string, ranks int) error { return checkSize(what, c.t, ranks) }

// AllreduceSum replaces data, n elements of dt (f32 or f64; i64 for
// counts), by their sum over the ranks, added in rank order:
// ((x0 + x1) + x2) + ..., the same bits on every rank and on any
// transport. It moves data as a ring all-reduce does: each rank sums one
// shard (a reduce-scatter through all-to-all), then every rank gathers the
// shards.
func (c *Comm) AllreduceSum(data []byte, dt ir.DType) error {
	if c.Size() == 1 {
		return nil // the sum over one rank
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	es := dt.Size()
	n := len(data) / es
	shard := ir.ShardLen(n, c.Size()) * es
	mine, err := c.reduceScatter(data, dt, shard)
	if err != nil {
		return err
	}
	return c.gather(mine, data, shard)
}

// SumFloat64s replaces v by its elementwise sum over the ranks, in rank
// order (AllreduceSum).
func (c *Comm) SumFloat64s(v []float64) error { return c.AllreduceSum(float64Bytes(v), ir.F64) }

// AllgatherFloat64s sets all to every rank's v in rank order:
// len(all) == Size()*len(v).
func (c *Comm) AllgatherFloat64s(v, all []float64) error {
	return c.Allgather(float64Bytes(v), float64Bytes(all))
}

// float64Bytes returns v's memory as bytes.
func float64Bytes(v []float64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v))
}

// ReduceScatter sets shard, this rank's shard of data (see ShardRange), to
// its sum over the ranks in rank order, as AllreduceSum computes it.
func (c *Comm) ReduceScatter(data []byte, dt ir.DType, shard []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := dt.Size()
	if want := ir.ShardLen(len(data)/es, c.Size()) * es; len(shard) != want {
		return fmt.Errorf("reduce-scatter: shard of %d bytes, expected %d", len(shard), want)
	}
	mine, err := c.reduceScatter(data, dt, len(shard))
	if err != nil {
		return err
	}
	copy(shard, mine)
	return nil
}

// Allgather sets data to the ranks' shards in rank order, cut to
// len(data): the inverse of ShardRange.
func (c *Comm) Allgather(shard, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gather(shard, data, len(shard))
}

// Bcast copies rank root's data into every rank's data.
func (c *Comm) Bcast(data []byte, root int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.Bcast(data, root)
}

// ShardRange returns the elements [lo, hi) of n that rank r's shard holds
// on ranks ranks: shards of ir.ShardLen(n, ranks) elements in rank order,
// the last ones cut at n (and empty past it).
func ShardRange(n, ranks, r int) (lo, hi int) {
	s := ir.ShardLen(n, ranks)
	return min(r*s, n), min((r+1)*s, n)
}

// grow returns c's scratch with at least n bytes.
func (c *Comm) grow(n int) []byte {
	if cap(c.scratch) < n {
		c.scratch = make([]byte, n)
	}
	return c.scratch[:n]
}

// reduceScatter sums this rank's shard (of shard bytes) of data over the
// ranks in rank order and returns it, in c's scratch.
func (c *Comm) reduceScatter(data []byte, dt ir.DType, shard int) ([]byte, error) {
	ranks := c.Size()
	buf := c.grow(2 * ranks * shard)
	send, recv := buf[:ranks*shard], buf[ranks*shard:]
	n := copy(send, data)
	clear(send[n:]) // padding past the data
	if err := c.t.Alltoall(send, recv); err != nil {
		return nil, err
	}
	sum := recv[:shard]
	for r := 1; r < ranks; r++ {
		if err := addInto(sum, recv[r*shard:(r+1)*shard], dt); err != nil {
			return nil, err
		}
	}
	return sum, nil
}

// gather sets data to every rank's mine (shard bytes each) in rank order,
// cut to len(data).
func (c *Comm) gather(mine, data []byte, shard int) error {
	ranks := c.Size()
	if shard*ranks == len(data) {
		tmp := append(c.grow(len(mine))[:0], mine...) // mine may alias scratch
		return c.t.Allgather(tmp, data)
	}
	buf := c.grow(shard + ranks*shard)
	tmp, all := buf[:shard], buf[shard:]
	copy(tmp, mine)
	if err := c.t.Allgather(tmp, all); err != nil {
		return err
	}
	copy(data, all)
	return nil
}

// addInto sets dst[i] += src[i] for elements of dt.
func addInto(dst, src []byte, dt ir.DType) error {
	switch dt {
	case ir.F32:
		add(view[float32](dst), view[float32](src))
	case ir.F64:
		add(view[float64](dst), view[float64](src))
	case ir.I64:
		add(view[int64](dst), view[int64](src))
	case ir.I32:
		add(view[int32](dst), view[int32](src))
	default:
		return fmt.Errorf("sum over ranks: expected f32, f64, i32 or i64 elements, found %s", dt)
	}
	return nil
}

func add[T float32 | float64 | int32 | int64](dst, src []T) {
	for i, v := range src {
		dst[i] += v
	}
}

func view[T float32 | float64 | int32 | int64](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
