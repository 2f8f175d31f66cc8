package cpu

import (
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// The ops of data-parallel training (ir/ops_dist.go) run on the node's
// communicator; the worker that runs a collective waits for the other
// ranks while the others go on with the steps that do not depend on it.

func init() {
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		register(ir.OpAllReduce, dt, buildAllReduce)
		register(ir.OpReduceScatter, dt, buildReduceScatter)
		register(ir.OpAllGather, dt, buildAllGather)
		register(ir.OpShard, dt, buildShard)
	}
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

func buildReduceScatter(n *kernels.Node) (kernels.Func, error) {
	if err := kernels.CheckCollective(n.Comm, n.Op, n.Attrs); err != nil {
		return nil, err
	}
	c, dt := n.Comm, n.Out.DType
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		return c.ReduceScatter(args[0].Data, dt, out.Data)
	}, nil
}

func buildAllGather(n *kernels.Node) (kernels.Func, error) {
	if err := kernels.CheckCollective(n.Comm, n.Op, n.Attrs); err != nil {
		return nil, err
	}
	c := n.Comm
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		return c.Allgather(args[0].Data, out.Data)
	}, nil
}

func buildShard(n *kernels.Node) (kernels.Func, error) {
	if err := kernels.CheckCollective(n.Comm, n.Op, n.Attrs); err != nil {
		return nil, err
	}
	rank := n.Comm.Rank()
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		kernels.Shard(out.Data, args[0].Data, rank)
		return nil
	}, nil
}
