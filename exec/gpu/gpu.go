//go:build cgo

package gpu

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/cogentcore/webgpu/wgpu"
	"github.com/kilnml/kiln/exec"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/kernels/wgsl"
	"github.com/kilnml/kiln/planner"
)

// statusSlot is the bytes of one step's status words in the status buffer:
// a binding offset must be aligned, and 256 suits every device.
const statusSlot = planner.Align

// mapTimeout bounds the wait for a readback: a device that does not finish
// is reported, not waited on for ever.
const mapTimeout = 5 * time.Minute

// Executor runs one plan on the GPU. It is not safe for concurrent use.
type Executor struct {
	plan   *planner.Plan
	d      *device
	chunk  int64          // bytes of each arena chunk
	arena  []*wgpu.Buffer // the arena, in chunks
	status *wgpu.Buffer   // status words, one slot per step that reports errors
	count  *wgpu.Buffer   // the step count (two u32 words), for kernels that bind it; or nil
	extra  []*wgpu.Buffer // scratch and data buffers of the kernels
	pipes  []*wgpu.ComputePipeline
	steps  []gpuStep
	names  *exec.Names // every name a user may set or get -> buffer

	readback *wgpu.Buffer // MAP_READ: the outputs, then the status slots
	outs     []readItem
	statusAt int64 // offset of the status slots in readback
	slots    int
	host     map[int]kernels.Tensor // host copies returned by Get, by buffer
	initial  []byte                 // the status buffer's contents before a step
	stepNo   int64
	closed   bool
	comm     kernels.Collective
}

type gpuStep struct {
	dispatches []recorded
	checks     []wgsl.Check
	slot       int  // status slot, or -1
	host       bool // a collective, run on the host (runCollective)
}

type recorded struct {
	pipe   *wgpu.ComputePipeline
	group  *wgpu.BindGroup
	groups [3]uint32
}

type readItem struct {
	buffer int
	at     int64 // offset in readback
}

// round4 rounds n up to a multiple of 4 (binding and copy sizes).
func round4(n int64) int64 { return (n + 3) &^ 3 }

// New prepares p for running on the GPU: it checks the plan, refuses what
// the device cannot hold or compute (f64 values, an arena or a buffer
// beyond the device's limits), allocates the arena, compiles every step's
// shaders and makes their bind groups, and sets the params and state to
// their initial values.
func New(p *planner.Plan, opts Options) (*Executor, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("invalid plan: %w", err)
	}
	for _, b := range p.Buffers {
		if _, err := wgsl.ValueType(b.Type.DType); err != nil {
			return nil, fmt.Errorf("plan %s: value %%%s is %s; the GPU has no f64 (WGSL), compile the graph in f32", p.Graph.Name, b.Name, b.Type)
		}
	}
	d, err := openDevice()
	if err != nil {
		return nil, err
	}
	x := &Executor{plan: p, d: d, names: exec.NewNames(p), host: map[int]kernels.Tensor{}}
	if opts.Comm != nil {
		x.comm = opts.Comm
	}
	if err := x.allocate(); err != nil {
		return nil, err
	}
	if err := x.build(); err != nil {
		x.Close()
		return nil, err
	}
	if err := x.Reset(opts.Seed); err != nil {
		x.Close()
		return nil, err
	}
	return x, nil
}

// Device returns the description of the GPU the executor runs on.
func (x *Executor) Device() string { return x.d.name }

// Software reports whether the adapter is a software renderer (Mesa's
// lavapipe, SwiftShader, WARP): correct, but orders of magnitude slower.
func (x *Executor) Software() bool { return x.d.software }

// ChunkBytes returns the arena chunk size for plans that run on the GPU:
// the most bytes one storage binding holds (maxStorageBufferBindingSize,
// and at most maxBufferSize), rounded down to planner.Align. kiln.Compile
// plans for the GPU with it (planner.Options.ChunkBytes).
func ChunkBytes() (int64, error) {
	d, err := openDevice()
	if err != nil {
		return 0, err
	}
	return d.chunkBytes(), nil
}

func (d *device) chunkBytes() int64 {
	binding := int64(d.limits.MaxStorageBufferBindingSize) &^ (planner.Align - 1)
	maxBuf := int64(d.limits.MaxBufferSize) &^ (planner.Align - 1)
	return min(binding, maxBuf)
}

// allocate makes the arena chunks, checking the plan against the device's
// limits: a plan placed in chunks (Plan.ChunkBytes) gets one storage
// buffer per chunk, which must fit one binding; a plan without chunks, one
// buffer per binding-sized part of the arena, which no buffer may straddle.
func (x *Executor) allocate() error {
	p := x.plan
	limit := x.d.chunkBytes()
	x.chunk = limit
	if p.ChunkBytes > 0 {
		if p.ChunkBytes > limit {
			return &NotChunkedError{fmt.Sprintf("plan %s is placed in chunks of %d bytes, but the GPU %s binds at most %d bytes at once", p.Graph.Name, p.ChunkBytes, x.d.name, limit)}
		}
		x.chunk = p.ChunkBytes
	}
	for _, b := range p.Buffers {
		if round4(b.Size) > x.chunk {
			return fmt.Errorf("plan %s: value %%%s (%s, %d bytes) is larger than the GPU %s binds at once (%d bytes)", p.Graph.Name, b.Name, b.Type, b.Size, x.d.name, x.chunk)
		}
		if c := b.Offset / x.chunk; b.Size > 0 && (b.Offset+round4(b.Size)-1)/x.chunk != c {
			return &NotChunkedError{fmt.Sprintf("plan %s: value %%%s at arena offset %d straddles the GPU's %d-byte binding boundary (the arena of %d bytes is not placed in chunks)", p.Graph.Name, b.Name, b.Offset, x.chunk, p.ArenaBytes)}
		}
	}
	n := max((p.ArenaBytes+x.chunk-1)/x.chunk, 1)
	for c := int64(0); c < n; c++ {
		size := min(p.ArenaBytes-c*x.chunk, x.chunk) + planner.Align // slack: a binding rounded up to 4 bytes at the end
		buf, err := x.d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: fmt.Sprintf("arena %d", c), Size: uint64(size),
			Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc | wgpu.BufferUsageCopyDst})
		if err != nil {
			return fmt.Errorf("plan %s: the GPU cannot allocate the arena (%d bytes): %v", p.Graph.Name, p.ArenaBytes, firstLine(err))
		}
		x.arena = append(x.arena, buf)
	}
	return nil
}

// Chunks returns the number of storage buffers the arena is allocated in.
func (x *Executor) Chunks() int { return len(x.arena) }

// firstLine returns the first line of err's message (wgpu's run on).
func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// region returns the arena buffer holding plan buffer i and its offset
// and binding size there.
func (x *Executor) region(i int) (*wgpu.Buffer, uint64, uint64) {
	b := x.plan.Buffers[i]
	c := b.Offset / x.chunk
	return x.arena[c], uint64(b.Offset - c*x.chunk), uint64(max(round4(b.Size), 4))
}

func (x *Executor) describe(s int) string {
	st := x.plan.Steps[s]
	if st.Kind == planner.Copy {
		return fmt.Sprintf("copy %%%s <- %%%s", x.plan.Buffers[st.Out].Name, x.plan.Buffers[st.Args[0]].Name)
	}
	return x.plan.Graph.FormatValue(ir.ID(st.Out))
}

// build makes every step's kernel: pipelines (one per distinct source),
// scratch and data buffers, bind groups, the status slots and the
// readback buffer.
func (x *Executor) build() error {
	p := x.plan
	pipes := map[string]*wgpu.ComputePipeline{}
	kerns := make([]*wgsl.Kernel, len(p.Steps))
	x.steps = make([]gpuStep, len(p.Steps))
	for s, st := range p.Steps {
		var k *wgsl.Kernel
		switch {
		case st.Kind == planner.Copy:
			k = wgsl.Copy(p.Buffers[st.Out].Type)
		case st.Op == ir.OpReshape && p.Buffers[st.Out].Alias == st.Args[0]:
			k = &wgsl.Kernel{} // the result is its argument's bytes, in place
		case st.Op.IsCollective():
			if err := kernels.CheckCollective(x.comm, st.Op, st.Attrs); err != nil {
				return fmt.Errorf("step %d (%s): %v", s, x.describe(s), err)
			}
			k = &wgsl.Kernel{}
			x.steps[s].host = true
		default:
			types := make([]ir.Type, len(st.Args))
			for j, a := range st.Args {
				types[j] = p.Buffers[a].Type
			}
			var err error
			k, err = wgsl.Build(&kernels.Node{Op: st.Op, Attrs: st.Attrs, Args: types, Out: p.Buffers[st.Out].Type})
			if err != nil {
				return fmt.Errorf("step %d (%s): %v", s, x.describe(s), err)
			}
		}
		kerns[s] = k
		x.steps[s].slot = -1
		for _, dp := range k.Dispatches {
			for _, o := range dp.Bind {
				if o.Kind == wgsl.Status && x.steps[s].slot < 0 {
					x.steps[s].slot = x.slots
					x.slots++
				}
			}
		}
		x.steps[s].checks = k.Checks
	}
	statusBytes := int64(max(x.slots, 1)) * statusSlot
	var err error
	x.status, err = x.d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: "status", Size: uint64(statusBytes),
		Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopySrc | wgpu.BufferUsageCopyDst})
	if err != nil {
		return fmt.Errorf("the GPU cannot allocate the status words: %v", firstLine(err))
	}
	x.initial = make([]byte, statusBytes)
	for sl := 0; sl < x.slots; sl++ {
		for b := 4; b < 8; b++ {
			x.initial[int64(sl)*statusSlot+int64(b)] = 0xff // word 1: the least index reported, from MaxUint32
		}
	}
	for s, k := range kerns {
		var scratch, data []*wgpu.Buffer
		for _, size := range k.Scratch {
			b, err := x.d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: "scratch", Size: uint64(max(round4(size), 4)), Usage: wgpu.BufferUsageStorage})
			if err != nil {
				return fmt.Errorf("step %d (%s): scratch buffer: %v", s, x.describe(s), firstLine(err))
			}
			scratch = append(scratch, b)
			x.extra = append(x.extra, b)
		}
		for _, dat := range k.Data {
			b, err := x.d.dev.CreateBufferInit(&wgpu.BufferInitDescriptor{Label: "data", Contents: padded(dat), Usage: wgpu.BufferUsageStorage})
			if err != nil {
				return fmt.Errorf("step %d (%s): data buffer: %v", s, x.describe(s), firstLine(err))
			}
			data = append(data, b)
			x.extra = append(x.extra, b)
		}
		st := p.Steps[s]
		for _, dp := range k.Dispatches {
			if len(dp.Bind) > int(x.d.limits.MaxStorageBuffersPerShaderStage) {
				return fmt.Errorf("step %d (%s): %d storage buffers in one shader, the GPU allows %d", s, x.describe(s), len(dp.Bind), x.d.limits.MaxStorageBuffersPerShaderStage)
			}
			lay, err := x.d.layout(len(dp.Bind))
			if err != nil {
				return fmt.Errorf("step %d (%s): the GPU refused a layout of %d buffers: %v", s, x.describe(s), len(dp.Bind), firstLine(err))
			}
			pipe, ok := pipes[dp.Source]
			if !ok {
				sm, err := x.d.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: st.Op.String(), WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: dp.Source}})
				if err != nil {
					return fmt.Errorf("step %d (%s): the GPU rejected its shader: %v", s, x.describe(s), err)
				}
				pipe, err = x.d.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{Label: st.Op.String(), Layout: lay.pipe, Compute: wgpu.ProgrammableStageDescriptor{Module: sm, EntryPoint: "main"}})
				sm.Release()
				if err != nil {
					return fmt.Errorf("step %d (%s): the GPU rejected its pipeline: %v", s, x.describe(s), err)
				}
				pipes[dp.Source] = pipe
				x.pipes = append(x.pipes, pipe)
			}
			entries := make([]wgpu.BindGroupEntry, len(dp.Bind))
			for i, o := range dp.Bind {
				e := wgpu.BindGroupEntry{Binding: uint32(i)}
				switch o.Kind {
				case wgsl.Arg:
					e.Buffer, e.Offset, e.Size = x.region(st.Args[o.Index])
				case wgsl.Out:
					e.Buffer, e.Offset, e.Size = x.region(st.Out)
				case wgsl.Scratch:
					e.Buffer, e.Size = scratch[o.Index], scratch[o.Index].GetSize()
				case wgsl.Data:
					e.Buffer, e.Size = data[o.Index], data[o.Index].GetSize()
				case wgsl.Status:
					e.Buffer, e.Offset, e.Size = x.status, uint64(x.steps[s].slot)*statusSlot, 8
				case wgsl.StepNo:
					if x.count == nil {
						x.count, err = x.d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: "step count", Size: 8,
							Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageCopyDst})
						if err != nil {
							return fmt.Errorf("step %d (%s): step count buffer: %v", s, x.describe(s), firstLine(err))
						}
					}
					e.Buffer, e.Size = x.count, 8
				}
				entries[i] = e
			}
			group, err := x.d.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{Layout: lay.group, Entries: entries})
			if err != nil {
				return fmt.Errorf("step %d (%s): binding its buffers: %v", s, x.describe(s), firstLine(err))
			}
			if dp.Groups[0] == 0 || dp.Groups[1] == 0 || dp.Groups[2] == 0 {
				group.Release()
				continue
			}
			x.steps[s].dispatches = append(x.steps[s].dispatches, recorded{pipe: pipe, group: group, groups: dp.Groups})
		}
	}
	// Readback: every output, then the status slots.
	var at int64
	for _, o := range p.Outputs {
		x.outs = append(x.outs, readItem{buffer: o.Buffer, at: at})
		at += round4(p.Buffers[o.Buffer].Size)
	}
	x.statusAt = at
	at += int64(x.slots) * statusSlot
	if at > 0 {
		x.readback, err = x.d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: "readback", Size: uint64(at), Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
		if err != nil {
			return fmt.Errorf("the GPU cannot allocate the readback buffer: %v", firstLine(err))
		}
	}
	return nil
}

// padded returns b padded with zeros to a multiple of 4 bytes (at least 4).
func padded(b []byte) []byte {
	n := max(round4(int64(len(b))), 4)
	if int64(len(b)) == n {
		return b
	}
	out := make([]byte, n)
	copy(out, b)
	return out
}

// Plan returns the plan the executor runs.
func (x *Executor) Plan() *planner.Plan { return x.plan }

// Names returns every name Set or Get accepts, sorted.
func (x *Executor) Names() []string {
	return x.names.List()
}

// Reset sets every param and state to its initial value for seed and the
// step count to 0.
func (x *Executor) Reset(seed uint64) error {
	x.stepNo = 0
	for _, group := range [][]int{x.plan.Params, x.plan.States} {
		for k, i := range group {
			b := x.plan.Buffers[i]
			vals, err := exec.InitialValues(x.plan.Graph.Value(b.Value), seed, k)
			if err != nil {
				return err
			}
			t := kernels.New(b.Type)
			if err := kernels.SetFloat64s(t, vals); err != nil {
				return err
			}
			if err := x.upload(i, t.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

// StepCount returns the number of steps completed since New or Reset: the
// step count that step-dependent kernels such as dropout read.
func (x *Executor) StepCount() int64 { return int64(x.stepNo) }

// SetStepCount sets the step count, so that a run restored from saved
// state continues as it would have had it never stopped. It returns an
// error for a negative count.
func (x *Executor) SetStepCount(n int64) error {
	if n < 0 {
		return fmt.Errorf("step count %d is negative", n)
	}
	x.stepNo = n
	return nil
}

func (x *Executor) upload(i int, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	buf, off, _ := x.region(i)
	if err := x.d.queue.WriteBuffer(buf, off, padded(data)); err != nil {
		return fmt.Errorf("uploading %%%s: %v", x.plan.Buffers[i].Name, firstLine(err))
	}
	return nil
}

// Set copies t into the input, param or state called name. The type must
// match the plan's exactly.
func (x *Executor) Set(name string, t kernels.Tensor) error {
	i, err := x.names.Settable(name, t.Type)
	if err != nil {
		return err
	}
	return x.upload(i, t.Data)
}

// Get returns a host copy of the tensor called name: an input, param,
// state, output or grad/PARAM. Outputs were read back by the last Step;
// anything else is read back from the device now. The copy is overwritten
// by the next Step or Get of the same name; copy what must outlive it.
func (x *Executor) Get(name string) (kernels.Tensor, error) {
	i, err := x.names.Lookup(name)
	if err != nil {
		return kernels.Tensor{}, err
	}
	t := x.hostTensor(i)
	for _, o := range x.outs {
		if o.buffer == i {
			return t, nil
		}
	}
	if err := x.read(i, t); err != nil {
		return kernels.Tensor{}, err
	}
	return t, nil
}

func (x *Executor) hostTensor(i int) kernels.Tensor {
	t, ok := x.host[i]
	if !ok {
		t = kernels.New(x.plan.Buffers[i].Type)
		x.host[i] = t
	}
	return t
}

// read copies buffer i from the device into t.
func (x *Executor) read(i int, t kernels.Tensor) error {
	size := uint64(max(round4(int64(len(t.Data))), 4))
	stage, err := x.d.dev.CreateBuffer(&wgpu.BufferDescriptor{Label: "read", Size: size, Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst})
	if err != nil {
		return fmt.Errorf("reading %%%s: %v", x.plan.Buffers[i].Name, firstLine(err))
	}
	defer stage.Release()
	enc, err := x.d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return fmt.Errorf("reading %%%s: %v", x.plan.Buffers[i].Name, firstLine(err))
	}
	defer enc.Release()
	buf, off, _ := x.region(i)
	if err := enc.CopyBufferToBuffer(buf, off, stage, 0, size); err != nil {
		return fmt.Errorf("reading %%%s: %v", x.plan.Buffers[i].Name, firstLine(err))
	}
	cb, err := enc.Finish(nil)
	if err != nil {
		return fmt.Errorf("reading %%%s: %v", x.plan.Buffers[i].Name, firstLine(err))
	}
	x.d.queue.Submit(cb)
	defer cb.Release() // after the work is done (see Step)
	m, err := x.mapRead(stage, size)
	if err != nil {
		return fmt.Errorf("reading %%%s: %v", x.plan.Buffers[i].Name, err)
	}
	copy(t.Data, m)
	return stage.Unmap()
}

// mapRead maps the MAP_READ buffer b after the work submitted so far and
// returns its first size bytes (valid until Unmap). It polls the device
// until the mapping is done, and gives up with an error when the device is
// lost or does not finish within mapTimeout.
func (x *Executor) mapRead(b *wgpu.Buffer, size uint64) ([]byte, error) {
	var status wgpu.BufferMapAsyncStatus
	done := false
	if err := b.MapAsync(wgpu.MapModeRead, 0, size, func(s wgpu.BufferMapAsyncStatus) { status, done = s, true }); err != nil {
		return nil, fmt.Errorf("the GPU could not map its results (device lost?): %v", firstLine(err))
	}
	if err := x.waitFor(func(bool) bool { return done }); err != nil {
		return nil, err
	}
	if status != wgpu.BufferMapAsyncStatusSuccess {
		return nil, fmt.Errorf("the GPU could not map its results (%v; device lost?)", status)
	}
	return b.GetMappedRange(0, uint(size)), nil
}

// waitFor polls the device until finished, given whether the queue is
// empty, reports true, and gives up with an error after mapTimeout.
//
// The polls do not block: wgpu-native's blocking poll waits at most 5
// seconds and then treats the submitted work as done although it still
// runs (gfx-rs/wgpu#3601, #4589; fixed upstream in 2025, after the
// wgpu-native this binding links). Past 5 seconds of work (one step of a
// large plan on a software adapter, or the first step after llvmpipe
// compiles the shaders without its cache) it would run the map callback
// before the copies, so the step would read stale results, and free the
// command buffer's resources under the running work, crashing the process
// later. A non-blocking poll reads the fence's actual value. Between polls
// it yields, then sleeps for doubling times up to a millisecond.
func (x *Executor) waitFor(finished func(empty bool) bool) error {
	deadline := time.Now().Add(mapTimeout)
	pause := time.Duration(0)
	for spins := 0; ; spins++ {
		if finished(x.d.dev.Poll(false, nil)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the GPU did not finish the step within %v", mapTimeout)
		}
		switch {
		case spins < 100:
			runtime.Gosched()
		default:
			pause = min(max(2*pause, 10*time.Microsecond), time.Millisecond)
			time.Sleep(pause)
		}
	}
}

// Step runs the plan once: it records every step's dispatches into one
// compute pass, then the copies of the outputs and status words, submits
// them as one command buffer and reads the outputs back. A data error a
// kernel reports (a label out of range) is returned naming the first such
// step in plan order; the params and state are then those the step
// computed anyway, so Reset before relying on them.
func (x *Executor) Step(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if x.closed {
		return fmt.Errorf("plan %s: the GPU executor is closed", x.plan.Graph.Name)
	}
	if x.slots > 0 {
		if err := x.d.queue.WriteBuffer(x.status, 0, x.initial); err != nil {
			return fmt.Errorf("the GPU refused the status words (device lost?): %v", firstLine(err))
		}
	}
	if x.count != nil {
		n := uint64(x.stepNo)
		if err := x.d.queue.WriteBuffer(x.count, 0, []byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24),
			byte(n >> 32), byte(n >> 40), byte(n >> 48), byte(n >> 56)}); err != nil {
			return fmt.Errorf("the GPU refused the step count (device lost?): %v", firstLine(err))
		}
	}
	// Everything recorded is released after the work is done (see cb
	// below).
	var release []func()
	defer func() {
		for _, f := range release {
			f()
		}
	}()
	begin := func() (*wgpu.CommandEncoder, *wgpu.ComputePassEncoder, error) {
		enc, err := x.d.dev.CreateCommandEncoder(nil)
		if err != nil {
			return nil, nil, fmt.Errorf("the GPU refused a command encoder (device lost?): %v", firstLine(err))
		}
		pass := enc.BeginComputePass(nil)
		release = append(release, enc.Release, pass.Release)
		return enc, pass, nil
	}
	enc, pass, err := begin()
	if err != nil {
		return err
	}
	for s, st := range x.steps {
		if st.host {
			// Submit what precedes the collective, reduce on the host,
			// and record what follows in a new command buffer.
			if err := pass.End(); err != nil {
				return fmt.Errorf("recording the step: %v", firstLine(err))
			}
			cb, err := enc.Finish(nil)
			if err != nil {
				return fmt.Errorf("recording the step: %v", firstLine(err))
			}
			x.d.queue.Submit(cb)
			release = append(release, cb.Release)
			if err := x.runCollective(s); err != nil {
				return err
			}
			if enc, pass, err = begin(); err != nil {
				return err
			}
			continue
		}
		for _, r := range st.dispatches {
			pass.SetPipeline(r.pipe)
			pass.SetBindGroup(0, r.group, nil)
			pass.DispatchWorkgroups(r.groups[0], r.groups[1], r.groups[2])
		}
	}
	if err := pass.End(); err != nil {
		return fmt.Errorf("recording the step: %v", firstLine(err))
	}
	for _, o := range x.outs {
		buf, off, size := x.region(o.buffer)
		if size := round4(x.plan.Buffers[o.buffer].Size); size == 0 {
			continue
		}
		if err := enc.CopyBufferToBuffer(buf, off, x.readback, uint64(o.at), uint64(round4(x.plan.Buffers[o.buffer].Size))); err != nil {
			return fmt.Errorf("recording the readback: %v", firstLine(err))
		}
		_ = size
	}
	if x.slots > 0 {
		if err := enc.CopyBufferToBuffer(x.status, 0, x.readback, uint64(x.statusAt), uint64(x.slots)*statusSlot); err != nil {
			return fmt.Errorf("recording the readback: %v", firstLine(err))
		}
	}
	cb, err := enc.Finish(nil)
	if err != nil {
		return fmt.Errorf("recording the step: %v", firstLine(err))
	}
	x.d.queue.Submit(cb)
	// The command buffer is released once its work is done: wgpu-native
	// crashes later (a segmentation fault on the next step's work) when it
	// is released right after Submit while long dispatches still run.
	defer cb.Release()
	if x.readback == nil {
		if err := x.waitFor(func(empty bool) bool { return empty }); err != nil {
			return fmt.Errorf("plan %s: %v", x.plan.Graph.Name, err)
		}
		x.stepNo++
		return nil
	}
	size := uint64(x.statusAt) + uint64(x.slots)*statusSlot
	m, err := x.mapRead(x.readback, size)
	if err != nil {
		return fmt.Errorf("plan %s: %v", x.plan.Graph.Name, err)
	}
	for _, o := range x.outs {
		t := x.hostTensor(o.buffer)
		copy(t.Data, m[o.at:])
	}

	var stepErr error
	for s, st := range x.steps {
		if st.slot < 0 {
			continue
		}
		w := m[x.statusAt+int64(st.slot)*statusSlot:]
		code := le32(w)
		if code == 0 {
			continue
		}
		index := int64(le32(w[4:]))
		stepErr = x.dataError(s, st, int(code), index)
		break
	}
	if err := x.readback.Unmap(); err != nil {
		return fmt.Errorf("plan %s: %v", x.plan.Graph.Name, firstLine(err))
	}
	if stepErr != nil {
		return stepErr
	}
	x.stepNo++
	return nil
}

// runCollective runs step s, an op of data-parallel training, on the
// host: it reads the argument back once the work submitted before it is
// done, runs the op on the communicator and uploads the result, which the
// work submitted after it reads.
func (x *Executor) runCollective(s int) error {
	st := x.plan.Steps[s]
	in := kernels.New(x.plan.Buffers[st.Args[0]].Type)
	if err := x.read(st.Args[0], in); err != nil {
		return fmt.Errorf("step %d (%s): %v", s, x.describe(s), err)
	}
	out := kernels.New(x.plan.Buffers[st.Out].Type)
	if err := kernels.RunCollective(x.comm, st.Op, out, in); err != nil {
		return fmt.Errorf("step %d (%s): %v", s, x.describe(s), err)
	}
	return x.upload(st.Out, out.Data)
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// dataError formats the data error code of step s at index, quoting the
// checked argument's element there.
func (x *Executor) dataError(s int, st gpuStep, code int, index int64) error {
	if code > len(st.checks) {
		return fmt.Errorf("step %d (%s): the GPU kernel reported error code %d", s, x.describe(s), code)
	}
	c := st.checks[code-1]
	var v int64
	if c.Arg >= 0 {
		i := x.plan.Steps[s].Args[c.Arg]
		t := kernels.New(x.plan.Buffers[i].Type)
		if err := x.read(i, t); err == nil {
			if vals := kernels.Float64s(t); index < int64(len(vals)) {
				v = int64(vals[index])
			}
		}
	}
	return fmt.Errorf("step %d (%s): %s", s, x.describe(s), c.Message(v, index))
}

// Close releases the executor's bind groups, pipelines and device
// buffers, after waiting for the device to finish any work submitted (a
// step that returned an error may leave some). The shared device stays
// open for other executors. Closing twice does nothing.
func (x *Executor) Close() error {
	if x.closed {
		return nil
	}
	x.closed = true
	x.d.dev.Poll(true, nil)
	for _, st := range x.steps {
		for _, r := range st.dispatches {
			r.group.Release()
		}
	}
	x.steps = nil
	for _, pipe := range x.pipes {
		pipe.Release()
	}
	x.pipes = nil
	for _, b := range x.arena {
		b.Release()
	}
	for _, b := range x.extra {
		b.Release()
	}
	if x.status != nil {
		x.status.Release()
	}
	if x.count != nil {
		x.count.Release()
	}
	if x.readback != nil {
		x.readback.Release()
	}
	return nil
}
