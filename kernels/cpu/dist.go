package cpu

import (
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// The ops of data-parallel training (ir/ops_dist.go) run on the node's
// communicator (kernels.RunCollective); the worker that runs a collective
// waits for the other ranks while the others go on with the steps that do
// not depend on it.

func init() {
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		for _, op := range []ir.Op{ir.OpAllReduce, ir.OpReduceScatter, ir.OpAllGather, ir.OpShard} {
			register(op, dt, buildCollective)
		}
	}
}

func buildCollective(n *kernels.Node) (kernels.Func, error) {
	if err := kernels.CheckCollective(n.Comm, n.Op, n.Attrs); err != nil {
		return nil, err
	}
	c, op := n.Comm, n.Op
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		return kernels.RunCollective(c, op, out, args[0])
	}, nil
}
