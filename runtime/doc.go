// Package runtime trains and evaluates from compiled plans without the
// compiler: a Go program that ships a plan file (.kplan, written by kiln
// compile; docs/PLANFILE.md) loads it with Load, makes a Trainer with
// NewTrainer, feeds batches (TrainBatch, Epoch, Step), evaluates and
// predicts (Evaluate, Predict), reads and writes params by name or as safetensors files
// (Get, Set, Params, SaveParams, LoadParams) and saves and resumes
// checkpoints (SaveCheckpoint, LoadCheckpoint).
//
// The package imports the plan format (planner), the executors (exec/cpu,
// and exec/gpu unless built with -tags kiln_nogpu), the kernels, and the
// safetensors and dataset readers; never the passes, the recompute solver
// (checkpoint) or the ONNX importer. The root package kiln, which compiles
// graphs, builds its Trainer on this one, and kiln run trains through it.
package runtime
