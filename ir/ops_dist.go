package ir

import "fmt"

// Collectives: ops whose result depends on the other processes (ranks) of
// a data-parallel job. The dataparallel pass inserts them; an executor runs
// them on the job's communicator and refuses a plan compiled for another
// number of ranks. Every rank issues the same collectives in the same
// order: each collective's optional second argument is the collective
// issued before it, which orders them as data flow does (its value is not
// read).

func distOps() []opRow {
	return []opRow{
		{OpAllReduce, OpInfo{Name: "allreduce", Args: []string{"x", "after"}, Optional: 1, Infer: inferAllReduce,
			NoGrad: "a collective is part of the update, after the backward graph",
			Doc:    "the elementwise sum of x over the ranks of a data-parallel job, added in rank order ((x0 + x1) + x2) + ..., the same bits on every rank; after, when given, is the collective issued before this one (only the order is read)",
			Attrs: []AttrSpec{
				{Name: "ranks", Kind: AttrInt, Required: true, Doc: "the number of ranks the plan is compiled for (at least 2)"},
			},
			Cost: func(args []Type, out Type, _ Attrs) float64 { return float64(out.Shape.NumElements()) },
		}},
	}
}

// IsCollective reports whether op communicates with the other ranks.
func (op Op) IsCollective() bool { return op == OpAllReduce }

func inferAllReduce(args []Type, a Attrs) (Type, error) {
	x := args[0]
	if x.DType != F32 && x.DType != F64 {
		return Type{}, fmt.Errorf("expected an f32 or f64 operand, found %s", x)
	}
	if r := a.Int("ranks", 0); r < 2 {
		return Type{}, fmt.Errorf("ranks: expected at least 2, found %d", r)
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}
