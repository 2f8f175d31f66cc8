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
	prev := ir.NoID
	attrs := ir.MakeAttrs("ranks", ir.Int(ranks))
	for k, b := range buckets {
		for _, i := range b.Grads {
			ready[k] = max(ready[k], g.Grads[i].Grad)
		}
		if k > 0 {
			ready[k] = max(ready[k], ready[k-1])
		}
		args := func(x ir.ID) []ir.ID {
			if prev == ir.NoID {
				return []ir.ID{x}
			}
			return []ir.ID{x, prev}
		}
		if len(b.Grads) == 1 {
			i := b.Grads[0]
			prev = e.Op(ir.OpAllReduce, attrs, args(g.Grads[i].Grad)...)
			g.Grads[i].Grad = mean(e, prev, ranks)
			ends[k] = ir.ID(len(g.Values))
			continue
		}
		flat := make([]ir.ID, len(b.Grads))
		for j, i := range b.Grads {
			flat[j] = e.Reshape(g.Grads[i].Grad, ir.Shape{g.Type(g.Grads[i].Grad).Shape.NumElements()})
		}
		prev = e.Op(ir.OpAllReduce, attrs, args(e.Op(ir.OpConcat, ir.MakeAttrs("axis", ir.Int(0)), flat...))...)
		off := 0
		for _, i := range b.Grads {
			t := g.Type(g.Grads[i].Grad)
			n := t.Shape.NumElements()
			part := e.Op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(0), "start", ir.Int(off), "end", ir.Int(off+n)), prev)
			g.Grads[i].Grad = mean(e, e.Reshape(part, t.Shape), ranks)
			off += n
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
	attrs := ir.MakeAttrs("ranks", ir.Int(sh.ranks))
	prev := ir.NoID
	chained := func(op ir.Op, a ir.Attrs, x ir.ID) ir.ID {
		if prev == ir.NoID {
			prev = e.Op(op, a, x)
		} else {
			prev = e.Op(op, a, x, prev)
		}
		return prev
	}
	flat := func(ids []ir.ID) ir.ID {
		parts := make([]ir.ID, len(ids))
		for j, id := range ids {
			parts[j] = e.Reshape(id, ir.Shape{g.Type(id).Shape.NumElements()})
		}
		if len(parts) == 1 {
			return parts[0]
		}
		return e.Op(ir.OpConcat, ir.MakeAttrs("axis", ir.Int(0)), parts...)
	}
	var slots []slot
	for k, b := range Buckets(g, sh.bucketBytes) {
		gs, ps := make([]ir.ID, len(b.Grads)), make([]ir.ID, len(b.Grads))
		for j, i := range b.Grads {
			gs[j], ps[j] = grads[i], g.Grads[i].Param
		}
		n := 0
		for _, p := range ps {
			n += g.Type(p).Shape.NumElements()
		}
		grad := mean(e, chained(ir.OpReduceScatter, attrs, flat(gs)), sh.ranks)
		value := e.Op(ir.OpShard, attrs, flat(ps))
		slots = append(slots, slot{name: fmt.Sprintf("dist.bucket%d", k), value: value, grad: grad, set: func(next ir.ID) {
			all := chained(ir.OpAllGather, attrs.With("shape", ir.Ints(n)), next)
			off := 0
			for _, p := range ps {
				t := g.Type(p)
				m := t.Shape.NumElements()
				part := all
				if m != n {
					part = e.Op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(0), "start", ir.Int(off), "end", ir.Int(off+m)), all)
				}
				update(p, e.Reshape(part, t.Shape))
				off += m
			}
		}})
	}
	return slots
}
