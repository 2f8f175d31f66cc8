package ir

import "fmt"

// Ops of data-parallel training, which run on the job's communicator: the
// collectives, whose results depend on the other processes (ranks) of
// the job, and shard, which depends on this one's rank. The dataparallel
// and optimizer passes insert them; an executor runs them on the job's
// communicator and refuses a plan compiled for another number of ranks.
// Every rank issues the same collectives in the same order: each
// collective's optional second argument is the collective issued before
// it, which orders them as data flow does (its value is not read).
//
// A shard of n elements is rank r's part of them: ShardLen(n, ranks)
// elements from r*ShardLen, the elements past n being zeros.

func distOps() []opRow {
	ranks := AttrSpec{Name: "ranks", Kind: AttrInt, Required: true, Doc: "the number of ranks the plan is compiled for (at least 2)"}
	noGrad := "an op of data-parallel training is part of the update, after the backward graph"
	bytes := func(args []Type, out Type, _ Attrs) float64 { return float64(out.Shape.NumElements()) }
	return []opRow{
		{OpAllReduce, OpInfo{Name: "allreduce", Args: []string{"x", "after"}, Optional: 1, Infer: inferAllReduce, NoGrad: noGrad, Cost: bytes,
			Doc:   "the elementwise sum of x over the ranks of a data-parallel job, added in rank order ((x0 + x1) + x2) + ..., the same bits on every rank; after, when given, is the collective issued before this one (only the order is read)",
			Attrs: []AttrSpec{ranks}}},
		{OpReduceScatter, OpInfo{Name: "reduce_scatter", Args: []string{"x", "after"}, Optional: 1, Infer: inferReduceScatter, NoGrad: noGrad, Cost: bytes,
			Doc:   "this rank's shard of the sum of x (flattened) over the ranks, added in rank order as allreduce adds: [ceil(n/ranks)]; after as for allreduce",
			Attrs: []AttrSpec{ranks}}},
		{OpAllGather, OpInfo{Name: "allgather", Args: []string{"x", "after"}, Optional: 1, Infer: inferAllGather, NoGrad: noGrad, Cost: bytes,
			Doc: "every rank's x, a shard [ceil(n/ranks)], in rank order, cut to n elements and shaped as shape; after as for allreduce",
			Attrs: []AttrSpec{ranks,
				{Name: "shape", Kind: attrInts, Required: true, Doc: "the result's shape, of n elements"}}}},
		{OpShard, OpInfo{Name: "shard", Args: []string{"x"}, Infer: inferShard, NoGrad: noGrad, Cost: bytes,
			Doc:   "this rank's shard of x (flattened): [ceil(n/ranks)] elements from rank*ceil(n/ranks), zeros past the end",
			Attrs: []AttrSpec{ranks}}},
	}
}

// IsCollective reports whether op runs on the job's communicator: a
// collective, or shard, which reads this process's rank.
func (op Op) IsCollective() bool {
	return op == OpAllReduce || op == OpReduceScatter || op == OpAllGather || op == OpShard
}

// ShardLen returns the elements of each rank's shard of n elements on
// ranks ranks: ceil(n/ranks).
func ShardLen(n, ranks int) int { return (n + ranks - 1) / ranks }

func distRanks(a Attrs) (int, error) {
	r := a.Int("ranks", 0)
	if r < 2 {
		return 0, fmt.Errorf("ranks: expected at least 2, found %d", r)
	}
	return int(r), nil
}

func distFloat(x Type) error {
	if x.DType != F32 && x.DType != F64 {
		return fmt.Errorf("expected an f32 or f64 operand, found %s", x)
	}
	return nil
}

func inferAllReduce(args []Type, a Attrs) (Type, error) {
	if err := distFloat(args[0]); err != nil {
		return Type{}, err
	}
	if _, err := distRanks(a); err != nil {
		return Type{}, err
	}
	return Type{args[0].DType, args[0].Shape.Clone()}, nil
}

func inferReduceScatter(args []Type, a Attrs) (Type, error) {
	if err := distFloat(args[0]); err != nil {
		return Type{}, err
	}
	return inferShard(args, a)
}

func inferShard(args []Type, a Attrs) (Type, error) {
	r, err := distRanks(a)
	if err != nil {
		return Type{}, err
	}
	return Type{args[0].DType, Shape{ShardLen(args[0].Shape.NumElements(), r)}}, nil
}

func inferAllGather(args []Type, a Attrs) (Type, error) {
	x := args[0]
	if err := distFloat(x); err != nil {
		return Type{}, err
	}
	r, err := distRanks(a)
	if err != nil {
		return Type{}, err
	}
	dims, _ := a.Ints("shape")
	s := make(Shape, len(dims))
	for i, d := range dims {
		if d < 0 {
			return Type{}, fmt.Errorf("shape: expected dimensions >= 0, found %v", dims)
		}
		s[i] = int(d)
	}
	if len(x.Shape) != 1 || x.Shape[0] != ShardLen(s.NumElements(), r) {
		return Type{}, fmt.Errorf("expected a shard [%d] of shape %v on %d ranks, found %s", ShardLen(s.NumElements(), r), dims, r, x)
	}
	return Type{x.DType, s}, nil
}
