package kiln

import "github.com/kilnml/kiln/runtime"

// TrainState is where a training run stands apart from its tensors
// (runtime.TrainState).
type TrainState = runtime.TrainState

// CheckpointManifest is the name of a checkpoint's manifest in its
// directory.
const CheckpointManifest = runtime.CheckpointManifest

// ReadCheckpoint reads the manifest of the checkpoint in dir without its
// tensors: runtime.ReadCheckpoint.
func ReadCheckpoint(dir string) (TrainState, error) { return runtime.ReadCheckpoint(dir) }
