package cpu

import (
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Collectives (ir/ops_dist.go) run on the node's communicator; the worker
// that runs one waits for the other ranks while the others go on with the
// steps that do not depend on it.

func init() {
	register(ir.OpAllReduce, ir.F32, buildAllReduce)
	register(ir.OpAllReduce, ir.F64, buildAllReduce)
}

func buildAllReduce(n *kernels.Node) (kernels.Func, error) {
	if err := kernels.CheckCollective(n.Comm, n.Op, n.Attrs); err != nil {
		return nil, err
	}
	c, dt := n.Comm, n.Out.DType
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		copy(out.Data, args[0].Data)
		return c.AllreduceSum(out.Data, dt)
	}, nil
}
