// Package checkpoint decides which forward activations of a training graph
// are kept for the backward pass and which are recomputed there, and
// rewrites the graph accordingly: each recomputed value gets a clone (same
// op, attributes and arguments; one per recomputation, NAME.remat,
// NAME.remat2, ...) inserted just before the first backward user it
// serves, those users read the clone, and the original dies at its last
// forward use. Because a clone computes the same op on the same bits
// (dropout's mask depends on the seed attribute and the step count, both
// the same), gradients with recomputation are bitwise identical to those
// without. The package imports only ir: the real peak of a choice is
// measured by a function the caller supplies (the planner's arena). The
// passes package runs it as the remat pass, after fuse and before dce.
//
// # Terms
//
// The forward region is every value up to the last one an output depends
// on; a later user is a backward user. An activation is a computed forward
// value that depends on an input or a param, that an output depends on, and
// that is no output, gradient or update value; it is saved when a backward
// user reads it. The chain is the sequence of cut vertices: activations
// after which no earlier input- or param-dependent value is read by a later
// forward value, so everything between two of them depends on the rest
// only through the first (a layer of an MLP, a residual block).
//
// # Schedules
//
// A decision is a schedule: a list of sweeps in the order they run, each
// cloning some forward values for a range of backward positions. A
// backward step reads the clone made by the last sweep that clones the
// value and whose range holds the step, else the original. A clone nobody
// reads is not made. The one-level case (manual marks, √n, segments, the
// greedy solver) is one sweep over the whole backward.
//
// # Policies
//
//   - Manual: the graph's recompute marks (.kir `recompute %a`, the
//     builder's Checkpoint and CheckpointSequential); marks on values no
//     backward step reads are ignored and counted.
//   - Sqrt: keep round(√n) boundaries, n the chain's saved cut vertices,
//     spread evenly over the chain's saved bytes; recompute the segments
//     between them from the boundary below; keep the last segment, as
//     PyTorch's checkpoint_sequential does. Segments=K is the same with
//     K−1 boundaries.
//   - Budget: fit the arena under B bytes with the least recompute FLOPs.
//     Given with another kind, the budget is only checked.
//
// The cost of a clone is FLOPs, which reads ir.Cost: each op's table row
// prices it (2·M·N·K for matmul, ...) or it costs one per element.
//
// # The chain dynamic program
//
// The dynamic program (solve, chain.go) chooses among segmentations: a subset of the cut vertices (at most
// maxBoundaries) kept as boundaries, each segment between two of them kept,
// recomputed once from the boundary below, or multi-level. The model's
// peak of a segmentation is the maximum over its segments of the bytes kept
// below it plus the segment's own maximum in the planner's liveness. The
// program runs over the boundaries in order with the Pareto-optimal (bytes
// kept below, cost) pairs as states (at most maxStates per boundary).
//
// Multi-level segments are binomial checkpointing (revolve's schedules,
// with per-layer bytes and FLOPs as in Gruslys et al. 2016; multi.go): a
// segment between two multi-level nodes (saved, separated and clean cut
// vertices, at most maxNodes) runs its backward as a tree of subproblems,
// each a leaf (recompute once) or a split at a node k: one sweep clones up
// to k, then the subproblem above k runs, then the one below. Under the
// node conditions the live bytes decompose exactly over the tree, and a
// dynamic program over the subproblems, shortest first, gives each the
// Pareto front of (peak, FLOPs) over all its trees (at most maxFront).
//
// Guarantee: among the segmentations above whose model peak is at most B,
// the answer has the least recompute FLOPs, while no front is thinned.
// The model's peak is the planner's lower bound of the rewritten plan when
// no clone or kept activation of a segment is read by a backward step
// attributed to another segment; this holds on MLP-, CNN- and
// residual-like chains. Tests check both against brute force over every
// schedule the program can express on small chains.
//
// # The greedy solver and its lower bound
//
// For any graph, the greedy solver repeatedly recomputes, at the step with
// the most live bytes, the activation kept across it that frees the most
// bytes per FLOP, undoing a try that does not lower the peak. Its answer
// comes with a lower bound on the recompute FLOPs of any schedule whose
// live bytes fit B (lowerBound in solve.go has the proof), so kiln plan
// prints how far from optimal it may be.
//
// # Meeting the budget
//
// The budget bounds the real arena, so every answer is planned. A
// solver whose answer exceeds B re-solves with the budget lowered by the
// excess (the chain program, below its answer's model peak, then bisecting
// between answers that fit and did not), at most tightenRounds times; the
// cheapest answer that fits wins. When none fits, the least-peak schedules
// are planned and the budget is refused with an error stating the least
// arena reached, so a budget at or above it is met.
//
// Recomputation relies on definition order being the schedule: the
// a compile with recomputation plans the graph's order (ScheduleTopo)
// and shares no memory in place. Where
// the optimizer's update phase holds the peak, no recomputation lowers it.
package checkpoint
