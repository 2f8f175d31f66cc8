package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/internal/atomicfile"
	"github.com/kilnml/kiln/kernels"
)

// TrainState is where a training run stands apart from its tensors: what a
// checkpoint needs, with the params and optimizer state, to continue the
// run as if it had never stopped. The data order is (Config's seed, Epoch,
// Batch): a resumed run replays the shuffles of the epochs before Epoch and
// continues Epoch at batch Batch.
type TrainState struct {
	Step   int64             // training steps done
	Epoch  int               // the epoch under way, from 1 (0 for a graph with no inputs)
	Batch  int               // batches of Epoch done, in that epoch's order
	Tally  Tally             // the results of the current pass so far
	Config map[string]string // how the run was started (seed, data, optimizer...): a resumed run must match it
}

// CheckpointManifest is the name of a checkpoint's manifest in its
// directory.
const CheckpointManifest = "manifest.json"

// checkpointFormat and checkpointVersion mark a checkpoint manifest.
const (
	checkpointFormat  = "kiln checkpoint"
	checkpointVersion = 1
)

// manifest is the JSON form of a checkpoint's manifest. Floats are
// strings (strconv's shortest form), so that they round-trip exactly and
// NaN and infinities survive.
type manifest struct {
	Format        string            `json:"format"`
	Version       int               `json:"version"`
	Graph         string            `json:"graph"`
	StateFile     string            `json:"state_file"`
	SHA256        string            `json:"sha256"`
	Step          int64             `json:"step"`
	Epoch         int               `json:"epoch"`
	Batch         int               `json:"batch"`
	ExecutorSteps int64             `json:"executor_steps"`
	Tally         manifestTally     `json:"tally"`
	Config        map[string]string `json:"config,omitempty"`
}

type manifestTally struct {
	Loss    string   `json:"loss"`
	Batches int64    `json:"batches"`
	Correct int64    `json:"correct"`
	Total   int64    `json:"total"`
	Count   int64    `json:"count"`
	Mean    []string `json:"mean,omitempty"`
	M2      []string `json:"m2,omitempty"`
	Squares []string `json:"squares,omitempty"`
}

func formatFloats(v []float64) []string {
	if v == nil {
		return nil
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return s
}

func parseFloats(s []string) ([]float64, error) {
	if s == nil {
		return nil, nil
	}
	v := make([]float64, len(s))
	for i, x := range s {
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", x)
		}
		v[i] = f
	}
	return v, nil
}

// stateName is the file name of the state of step.
func stateName(step int64) string { return fmt.Sprintf("state-%08d.safetensors", step) }

// SaveCheckpoint writes a checkpoint of the run to dir (created if need
// be): the params and state of the training step (optimizer moments,
// bias-correction powers and any other state) in a safetensors file, and
// a manifest (CheckpointManifest, JSON) with s, the executor's step count
// (which dropout masks follow) and the state file's SHA-256. Each file is
// written to a temporary file, synced and renamed; the manifest is written
// last and names the new state file, and only then are older state files
// removed. A process killed at any point thus leaves a manifest that names
// a complete state file: the previous checkpoint or the new one. In
// data-parallel training the state is every rank's alike, so one rank
// saves it, unless it is Sharded: then each rank saves its own, in a
// directory of its own.
func (t *Trainer) SaveCheckpoint(dir string, s TrainState) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := t.Plan
	var ts []safetensors.Tensor
	for _, i := range slices.Concat(p.Params, p.States) {
		name := p.Buffers[i].Name
		v, err := t.train.Get(name)
		if err != nil {
			return err
		}
		ts = append(ts, safetensors.Tensor{Name: name, Type: v.Type, Data: v.Data})
	}
	data, err := safetensors.Encode(ts, map[string]string{"graph": p.Graph.Name, "step": strconv.FormatInt(s.Step, 10)})
	if err != nil {
		return fmt.Errorf("checkpoint %s: %v", dir, err)
	}
	name := stateName(s.Step)
	if err := atomicfile.WriteFile(filepath.Join(dir, name), data); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	m := manifest{
		Format: checkpointFormat, Version: checkpointVersion, Graph: p.Graph.Name,
		StateFile: name, SHA256: hex.EncodeToString(sum[:]),
		Step: s.Step, Epoch: s.Epoch, Batch: s.Batch, ExecutorSteps: t.train.StepCount(),
		Tally: manifestTally{
			Loss: strconv.FormatFloat(s.Tally.Loss, 'g', -1, 64), Batches: s.Tally.Batches,
			Correct: s.Tally.Correct, Total: s.Tally.Total, Count: s.Tally.Count,
			Mean: formatFloats(s.Tally.Mean), M2: formatFloats(s.Tally.M2), Squares: formatFloats(s.Tally.Squares),
		},
		Config: s.Config,
	}
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint %s: %v", dir, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, CheckpointManifest), append(js, '\n')); err != nil {
		return err
	}
	// The new checkpoint is complete: remove older state files and any
	// temporary file a killed save left behind.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		stale := strings.HasPrefix(n, "state-") && strings.HasSuffix(n, ".safetensors") && n != name
		tmp := strings.HasPrefix(n, ".state-") || strings.HasPrefix(n, "."+CheckpointManifest+".tmp-")
		if stale || tmp {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadCheckpoint reads the manifest of the checkpoint in dir and returns
// the run's TrainState without loading its tensors, so that a caller can
// compare the run's Config with its own before LoadCheckpoint.
func ReadCheckpoint(dir string) (TrainState, error) {
	m, _, err := readManifest(dir)
	if err != nil {
		return TrainState{}, err
	}
	return m.state()
}

// readManifest reads and checks the manifest of the checkpoint in dir and
// returns it with its path.
func readManifest(dir string) (manifest, string, error) {
	var m manifest
	mpath := filepath.Join(dir, CheckpointManifest)
	js, err := os.ReadFile(mpath)
	if err != nil {
		return m, mpath, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, mpath, fmt.Errorf("%s: not a checkpoint manifest: %v", mpath, err)
	}
	if m.Format != checkpointFormat || m.Version != checkpointVersion {
		return m, mpath, fmt.Errorf("%s: expected a %q manifest of version %d, found %q version %d", mpath, checkpointFormat, checkpointVersion, m.Format, m.Version)
	}
	if _, err := m.state(); err != nil {
		return m, mpath, fmt.Errorf("%s: %v", mpath, err)
	}
	return m, mpath, nil
}

// state returns the TrainState the manifest records.
func (m manifest) state() (TrainState, error) {
	s := TrainState{Step: m.Step, Epoch: m.Epoch, Batch: m.Batch, Config: m.Config}
	s.Tally = Tally{Batches: m.Tally.Batches, Correct: m.Tally.Correct, Total: m.Tally.Total, Count: m.Tally.Count}
	var errs [4]error
	s.Tally.Loss, errs[0] = strconv.ParseFloat(m.Tally.Loss, 64)
	s.Tally.Mean, errs[1] = parseFloats(m.Tally.Mean)
	s.Tally.M2, errs[2] = parseFloats(m.Tally.M2)
	s.Tally.Squares, errs[3] = parseFloats(m.Tally.Squares)
	for _, err := range errs {
		if err != nil {
			return s, fmt.Errorf("tally: %v", err)
		}
	}
	return s, nil
}

// LoadCheckpoint reads the checkpoint in dir that SaveCheckpoint wrote,
// sets the params, the state and the executor's step count from it, and
// returns the run's TrainState. The checkpoint must hold every param and
// state of the training step with its exact type, and nothing else.
func (t *Trainer) LoadCheckpoint(dir string) (TrainState, error) {
	var s TrainState
	m, mpath, err := readManifest(dir)
	if err != nil {
		return s, err
	}
	if m.Graph != t.Plan.Graph.Name {
		return s, fmt.Errorf("%s: the checkpoint is of graph %s, the model is %s", mpath, m.Graph, t.Plan.Graph.Name)
	}
	if m.StateFile != filepath.Base(m.StateFile) || !strings.HasSuffix(m.StateFile, ".safetensors") {
		return s, fmt.Errorf("%s: state file %q is not a safetensors file in the checkpoint's directory", mpath, m.StateFile)
	}
	spath := filepath.Join(dir, m.StateFile)
	data, err := os.ReadFile(spath)
	if err != nil {
		return s, err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != m.SHA256 {
		return s, fmt.Errorf("%s: SHA-256 %s, the manifest expects %s", spath, hex.EncodeToString(sum[:]), m.SHA256)
	}
	tensors, _, err := safetensors.Decode(data)
	if err != nil {
		return s, fmt.Errorf("%s: %v", spath, err)
	}
	byName := map[string]safetensors.Tensor{}
	for _, ts := range tensors {
		byName[ts.Name] = ts
	}
	p := t.Plan
	want := slices.Concat(p.Params, p.States)
	for _, i := range want {
		b := p.Buffers[i]
		ts, ok := byName[b.Name]
		if !ok {
			return s, fmt.Errorf("%s: no tensor %q (%s) of the training step", spath, b.Name, b.Type)
		}
		if !ts.Type.Equal(b.Type) {
			return s, fmt.Errorf("%s: tensor %q: expected %s, found %s", spath, b.Name, b.Type, ts.Type)
		}
	}
	if len(byName) != len(want) {
		for name := range byName {
			if _, ok := findBuffer(p, name); !ok {
				return s, fmt.Errorf("%s: tensor %q is not a param or state of the training step", spath, name)
			}
		}
	}
	for _, i := range want {
		ts := byName[p.Buffers[i].Name]
		if err := t.train.Set(ts.Name, kernels.Tensor{Type: ts.Type, Data: ts.Data}); err != nil {
			return s, fmt.Errorf("%s: %v", spath, err)
		}
	}
	if err := t.train.SetStepCount(m.ExecutorSteps); err != nil {
		return s, fmt.Errorf("%s: %v", mpath, err)
	}
	return m.state()
}
