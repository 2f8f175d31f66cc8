package passes

import (
	"fmt"
	"slices"

	"github.com/kilnml/kiln/ir"
)

// DefaultBucketBytes is the size up to which the dataparallel pass groups
// gradients into one reduction, as PyTorch's DistributedDataParallel does
// (25 MB): large enough that each collective's latency is paid rarely,
// small enough that the first buckets travel while the backward goes on.
const DefaultBucketBytes = 25 << 20

// Bucket is one reduction of the dataparallel pass: the gradients it
// carries (as indices into Graph.Grads) and their bytes.
type Bucket struct {
	Grads []int
	Bytes int64
}

// Buckets returns the reduction buckets of g's gradients for bucketBytes
// (DefaultBucketBytes when 0): gradients in the order the backward graph
// defines them (the last layers' first), grouped while they share a dtype
// and the bucket stays within bucketBytes (a larger gradient is a bucket of
// its own). Every rank computes the same buckets from the same graph.
func Buckets(g *ir.Graph, bucketBytes int64) []Bucket {
	if bucketBytes <= 0 {
		bucketBytes = DefaultBucketBytes
	}
	order := make([]int, len(g.Grads))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(g.Grads[a].Grad) - int(g.Grads[b].Grad) })
	var bs []Bucket
	for _, i := range order {
		t := g.Type(g.Grads[i].Grad)
		n := int64(t.Bytes())
		if k := len(bs) - 1; k >= 0 && bs[k].Bytes+n <= bucketBytes &&
			g.Type(g.Grads[bs[k].Grads[0]].Grad).DType == t.DType {
			bs[k].Grads = append(bs[k].Grads, i)
			bs[k].Bytes += n
			continue
		}
		bs = append(bs, Bucket{Grads: []int{i}, Bytes: n})
	}
	return bs
}

// DataParallel makes g's gradients those of data-parallel training on
// ranks processes: each rank computes the gradients of its own batch, and
// the pass replaces every gradient by its mean over the ranks: an
// allreduce (a sum in rank order) of each bucket (Buckets) divided by
// ranks. The optimizer then updates every rank's params alike. This is the
// arithmetic of gradient accumulation over ranks steps (the optimizer's
// accumulate): N ranks train bitwise as one process with -accum N.
//
// A bucket of several gradients reduces their concatenation; the
// collectives are chained (each one's "after" argument is the previous
// one) so that every rank issues them in the same order, and each is placed
// right after the last gradient it carries, so that an executor can
// overlap it with the rest of the backward graph.
func DataParallel(g *ir.Graph, ranks int, bucketBytes int64) error {
	if ranks < 2 {
		return fmt.Errorf("data-parallel training needs at least 2 ranks, found %d", ranks)
	}
	if len(g.Grads) == 0 {
		return fmt.Errorf("the graph has no gradients; run autodiff first")
	}
	for _, gp := range g.Grads {
		if dt := g.Type(gp.Grad).DType; dt != ir.F32 && dt != ir.F64 {
			return fmt.Errorf("param %%%s: gradients of data-parallel training must be f32 or f64, found %s", g.Values[gp.Param].Name, dt)
		}
	}
	first := ir.ID(len(g.Values))
	e := ir.NewEmitter(g, "dp")
	buckets := Buckets(g, bucketBytes)
	ready := make([]ir.ID, len(buckets)) // per bucket: the last gradient it waits for
	ends := make([]ir.ID, len(buckets))  // per bucket: one past its last value
	c := newChain(e, ranks)
	for k, b := range buckets {
		grads := make([]ir.ID, len(b.Grads))
		for j, i := range b.Grads {
			grads[j] = g.Grads[i].Grad
			ready[k] = max(ready[k], grads[j])
		}
		if k > 0 {
			ready[k] = max(ready[k], ready[k-1])
		}
		sum := c.op(ir.OpAllReduce, nil, flat(e, grads))
		for j, part := range unflat(e, sum, grads) {
			g.Grads[b.Grads[j]].Grad = mean(e, part, ranks)
		}
		ends[k] = ir.ID(len(g.Values))
	}
	if err := e.Err(); err != nil {
		return err
	}
	// Place each bucket's values right after the gradient it waits for.
	order := make([]ir.ID, 0, len(g.Values))
	k, start := 0, first
	for id := ir.ID(0); id < first; id++ {
		order = append(order, id)
		for k < len(buckets) && ready[k] == id {
			for v := start; v < ends[k]; v++ {
				order = append(order, v)
			}
			start = ends[k]
			k++
		}
	}
	for v := start; v < ir.ID(len(g.Values)); v++ {
		order = append(order, v)
	}
	return g.Permute(order)
}

// chain emits the collectives of data-parallel training, each taking the
// one emitted before it as its "after" argument, so that every rank
// issues them in the same order.
type chain struct {
	e     *ir.Emitter
	attrs ir.Attrs // ranks
	prev  ir.ID
}

func newChain(e *ir.Emitter, ranks int) *chain {
	return &chain{e: e, attrs: ir.MakeAttrs("ranks", ir.Int(ranks)), prev: ir.NoID}
}

// op appends op on x with the chain's attributes and attrs' and returns it.
func (c *chain) op(op ir.Op, attrs ir.Attrs, x ir.ID) ir.ID {
	a := c.attrs
	for _, kv := range attrs {
		a = a.With(kv.Key, kv.Value)
	}
	if c.prev == ir.NoID {
		c.prev = c.e.Op(op, a, x)
	} else {
		c.prev = c.e.Op(op, a, x, c.prev)
	}
	return c.prev
}

// flat returns the values ids as one reduction's operand: their elements
// concatenated in order, or the one value itself (the collectives read any
// shape as its elements in order).
func flat(e *ir.Emitter, ids []ir.ID) ir.ID {
	if len(ids) == 1 {
		return ids[0]
	}
	parts := make([]ir.ID, len(ids))
	for j, id := range ids {
		parts[j] = e.Reshape(id, ir.Shape{e.Type(id).Shape.NumElements()})
	}
	return e.Op(ir.OpConcat, ir.MakeAttrs("axis", ir.Int(0)), parts...)
}

// unflat cuts all, the elements of the values like (as flat joined them),
// back into values of their shapes.
func unflat(e *ir.Emitter, all ir.ID, like []ir.ID) []ir.ID {
	out := make([]ir.ID, len(like))
	off := 0
	for j, id := range like {
		t := e.Type(id)
		n := t.Shape.NumElements()
		part := all
		if len(like) > 1 {
			part = e.Op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(0), "start", ir.Int(off), "end", ir.Int(off+n)), all)
		}
		out[j] = e.Reshape(part, t.Shape)
		off += n
	}
	return out
}

// mean returns sum divided by ranks, in the gradient's dtype, as the
// optimizer's accumulate divides its sum by the steps.
func mean(e *ir.Emitter, sum ir.ID, ranks int) ir.ID {
	return e.Op(ir.OpDiv, nil, sum, e.Scalar(float64(ranks), e.Type(sum).DType))
}

// shardSlots returns the optimizer's slots of data-parallel training on
// sh.ranks ranks with sharded optimizer state (ZeRO stage 1): for each
// bucket (Buckets) of the gradients grads, the bucket's gradients
// concatenated are reduced to this rank's shard (reduce_scatter, a sum in
// rank order, then divided by the ranks: the mean allreduce gives, cut to
// the shard), and the slot updates this rank's shard of the bucket's
// params (shard), its state a shard too; the updated shards are gathered
// (allgather) and cut back into the params. The update is elementwise, so
// every param ends bitwise as without sharding, while each rank keeps
// 1/ranks of the optimizer state. The collectives are chained in the order
// they are made: the reductions, then the gathers.
func shardSlots(g *ir.Graph, e *ir.Emitter, grads []ir.ID, sh *sharding, update func(target, value ir.ID)) []slot {
	c := newChain(e, sh.ranks)
	var slots []slot
	for k, b := range Buckets(g, sh.bucketBytes) {
		gs, ps := make([]ir.ID, len(b.Grads)), make([]ir.ID, len(b.Grads))
		n := 0
		for j, i := range b.Grads {
			gs[j], ps[j] = grads[i], g.Grads[i].Param
			n += g.Type(ps[j]).Shape.NumElements()
		}
		grad := mean(e, c.op(ir.OpReduceScatter, nil, flat(e, gs)), sh.ranks)
		value := e.Op(ir.OpShard, c.attrs, flat(e, ps))
		slots = append(slots, slot{name: fmt.Sprintf("dist.bucket%d", k), value: value, grad: grad, set: func(next ir.ID) {
			all := c.op(ir.OpAllGather, ir.MakeAttrs("shape", ir.Ints(n)), next)
			for j, part := range unflat(e, all, ps) {
				update(ps[j], part)
			}
		}})
	}
	return slots
}
