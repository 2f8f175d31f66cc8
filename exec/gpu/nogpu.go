//go:build !cgo

package gpu

import (
	"context"
	"errors"

	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// ErrNotBuilt is returned by New in a kiln built without cgo.
var ErrNotBuilt = errors.New("GPU support was not built in (kiln was built with CGO_ENABLED=0)")

// Executor is the GPU executor; without cgo none can be made.
type Executor struct{}

// Available reports why no GPU can be used: always ErrNotBuilt here.
func Available() (string, error) { return "", ErrNotBuilt }

// New returns ErrNotBuilt.
func New(*planner.Plan, Options) (*Executor, error) { return nil, ErrNotBuilt }

// Plan returns nil.
func (x *Executor) Plan() *planner.Plan { return nil }

// Names returns nil.
func (x *Executor) Names() []string { return nil }

// Set returns ErrNotBuilt.
func (x *Executor) Set(string, kernels.Tensor) error { return ErrNotBuilt }

// Get returns ErrNotBuilt.
func (x *Executor) Get(string) (kernels.Tensor, error) { return kernels.Tensor{}, ErrNotBuilt }

// Step returns ErrNotBuilt.
func (x *Executor) Step(context.Context) error { return ErrNotBuilt }

// Reset returns ErrNotBuilt.
func (x *Executor) Reset(uint64) error { return ErrNotBuilt }

// Close does nothing.
func (x *Executor) Close() error { return nil }

// Device returns "".
func (x *Executor) Device() string { return "" }

// Software returns false.
func (x *Executor) Software() bool { return false }

// StepCount returns 0.
func (x *Executor) StepCount() int64 { return 0 }

// SetStepCount returns ErrNotBuilt.
func (x *Executor) SetStepCount(int64) error { return ErrNotBuilt }

// ChunkBytes returns ErrNotBuilt.
func ChunkBytes() (int64, error) { return 0, ErrNotBuilt }

// Chunks returns 0.
func (x *Executor) Chunks() int { return 0 }
