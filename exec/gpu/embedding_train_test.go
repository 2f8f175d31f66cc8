package gpu_test

import (
	"math/rand/v2"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// embeddingModel is a bag-of-tokens classifier whose forward and backward
// use the movement, reduction and loss kernels: embedding (backward
// index_add), slice, concat, max and mean over the tokens (max_grad),
// log_softmax and nll_loss (log_softmax_grad, fused with the gradient
// additions after it into fused_softmax_grad; the mean of the
// log-probabilities keeps the fuse pass from making them one
// softmax_cross_entropy), gather with mse_loss (backward scatter_add),
// logsumexp and std.
const embeddingModel = `graph bag
param %table: f32[50,16]
param %w: f32[32,10]
input %tok: i64[8,5]
input %labels: i64[8]
input %pick: i64[8,3]
input %target: f32[8,3]
%e = embedding %table, %tok
%tail = slice %e {axis=1, start=1}
%c = concat %e, %tail {axis=1}
%mx = max %c {axes=[1]}
%mn = mean %c {axes=[1]}
%f = concat %mx, %mn {axis=1}
%h = matmul %f, %w
%ls = log_softmax %h
%nll = nll_loss %ls, %labels
%g = gather %h, %pick {axis=1}
%mse = mse_loss %g, %target
%lsm = mean %ls
%lse = logsumexp %h {axes=[1]}
%v = std %f {axes=[1]}
%r = add %lse, %v
%rm = mean %r
%a1 = add %nll, %mse
%a2 = add %a1, %lsm
%loss = add %a2, %rm
output %loss
`

// planOps returns the ops of p's kernel steps.
func planOps(p *planner.Plan) map[ir.Op]bool {
	ops := map[ir.Op]bool{}
	for _, s := range p.Steps {
		if s.Kind != planner.Copy {
			ops[s.Op] = true
		}
	}
	return ops
}

// TestEmbeddingModelTrainsLikeCPU compares the embedding model's
// gradients after one step, and its params and Adam state after four Adam
// steps, on the GPU and the CPU (within gradTol).
func TestEmbeddingModelTrainsLikeCPU(t *testing.T) {
	needGPU(t)
	t.Run("gradients", func(t *testing.T) {
		p := compile(t, []byte(embeddingModel), kiln.Options{Grad: true})
		ops := planOps(p)
		for _, op := range []ir.Op{ir.OpEmbedding, ir.OpIndexAdd, ir.OpGather, ir.OpScatterAdd, ir.OpMaxGrad, ir.OpFusedSoftmaxGrad, ir.OpNLLLoss, ir.OpMSELoss, ir.OpLogSumExp, ir.OpStd, ir.OpSlice, ir.OpConcat, ir.OpPad} {
			if !ops[op] {
				t.Errorf("the training plan has no %s step", op)
			}
		}
		c, g := executors(t, p)
		feed(t, p, rand.New(rand.NewPCG(1, 2)), 10, c, g)
		stepAll(t, 0, c, g)
		if len(p.Grads) != 2 {
			t.Fatalf("%d gradients, want 2", len(p.Grads))
		}
		compareOutputsAndGrads(t, p, c, g)
	})
	t.Run("adam", func(t *testing.T) {
		opt := passes.OptimizerConfig{Kind: "adam", LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
		p := compile(t, []byte(embeddingModel), kiln.Options{Optimizer: &opt})
		c, g := executors(t, p)
		trainMatches(t, p, c, g, rand.New(rand.NewPCG(5, 6)), 10, 4)
	})
}

// TestSoftmaxStepTrainsLikeCPU trains bench/softmax_step.kir's step,
// smaller, with SGD on the GPU and the CPU (within gradTol): its update
// is the epilogue of fused_softmax_grad, computed in the param's memory.
func TestSoftmaxStepTrainsLikeCPU(t *testing.T) {
	needGPU(t)
	const src = `graph softmax_step
input %x: f32[37,50]
input %t: f32[37,50]
param %w: f32[37,50] {init="normal", scale=1.0}
%z = mul %x, %w
%y = softmax %z
%p = mul %y, %t
%loss = sum %p
output %loss
`
	opt := passes.OptimizerConfig{Kind: "sgd", LR: 0.5}
	p := compile(t, []byte(src), kiln.Options{Optimizer: &opt})
	var update *planner.Buffer
	for _, s := range p.Steps {
		switch {
		case s.Kind == planner.Copy:
			t.Errorf("the plan copies %%%s, want every update computed in place", p.Buffers[s.Out].Name)
		case s.Op == ir.OpFusedSoftmaxGrad:
			update = &p.Buffers[s.Out]
		}
	}
	if update == nil || update.Alias < 0 || p.Buffers[update.Alias].Name != "w" {
		t.Fatalf("fused_softmax_grad does not compute the new %%w in its memory:\n%s", p.Format())
	}
	c, g := executors(t, p)
	trainMatches(t, p, c, g, rand.New(rand.NewPCG(7, 8)), 10, 4)
}

// TestReshapeInPlaceLikeCPU runs, unfused, a graph whose reshapes take
// their dying arguments' memory (forward and backward) on the GPU and the
// CPU, comparing the outputs and gradients (within gradTol).
func TestReshapeInPlaceLikeCPU(t *testing.T) {
	needGPU(t)
	const src = `graph reshapes
input %x: f32[6,8]
param %w: f32[6,8] {init="normal", scale=1.0}
%a = mul %x, %w
%b = reshape %a {shape=[2,24]}
%c = tanh %b
%d = reshape %c {shape=[48]}
%loss = sum %d
output %loss
`
	p := compile(t, []byte(src), kiln.Options{Grad: true, O0: true})
	reshapes := 0
	for _, s := range p.Steps {
		if s.Op == ir.OpReshape && p.Buffers[s.Out].Alias == s.Args[0] {
			reshapes++
		}
	}
	if reshapes < 3 {
		t.Fatalf("%d reshapes in place, want 3 or more:\n%s", reshapes, p.Format())
	}
	c, g := executors(t, p)
	feed(t, p, rand.New(rand.NewPCG(9, 10)), 10, c, g)
	stepAll(t, 0, c, g)
	compareOutputsAndGrads(t, p, c, g)
}
