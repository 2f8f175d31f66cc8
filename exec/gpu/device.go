//go:build cgo

package gpu

import (
	"fmt"
	"os"
	"sync"

	"github.com/cogentcore/webgpu/wgpu"
)

// device is the process's one WebGPU device, opened on first use and
// shared by every executor.
type device struct {
	dev    *wgpu.Device
	queue  *wgpu.Queue
	limits wgpu.Limits
	name   string
	// software is set for a CPU adapter (Mesa's llvmpipe).
	software bool

	mu      sync.Mutex
	layouts map[int]layout // by number of bindings
}

// layout is the explicit bind group layout of a shader with n read_write
// storage buffers at bindings 0 .. n-1, and its pipeline layout.
type layout struct {
	group *wgpu.BindGroupLayout
	pipe  *wgpu.PipelineLayout
}

// layout returns the layout of n storage bindings, made on first use and
// kept while the process runs. Every kernel declares its buffers
// var<storage, read_write> at bindings 0 .. n-1 (kernels/wgsl), so one
// layout per n serves them all. The layout is explicit because, with the
// layout WebGPU derives from a shader, wgpu's GL backend bound buffers to
// the wrong bindings: a kernel's result went to its status words and its
// status words to the result (the derived layout's entries are not in
// binding order, and the GL backend pairs them with the bind group's in
// order).
func (d *device) layout(n int) (layout, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l, ok := d.layouts[n]; ok {
		return l, nil
	}
	entries := make([]wgpu.BindGroupLayoutEntry, n)
	for i := range entries {
		entries[i] = wgpu.BindGroupLayoutEntry{Binding: uint32(i), Visibility: wgpu.ShaderStageCompute,
			Buffer: wgpu.BufferBindingLayout{Type: wgpu.BufferBindingTypeStorage}}
	}
	g, err := d.dev.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: fmt.Sprintf("%d buffers", n), Entries: entries})
	if err != nil {
		return layout{}, err
	}
	pl, err := d.dev.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{Label: fmt.Sprintf("%d buffers", n), BindGroupLayouts: []*wgpu.BindGroupLayout{g}})
	if err != nil {
		g.Release()
		return layout{}, err
	}
	l := layout{group: g, pipe: pl}
	if d.layouts == nil {
		d.layouts = map[int]layout{}
	}
	d.layouts[n] = l
	return l, nil
}

var (
	openOnce sync.Once
	shared   *device
	openErr  error
)

// openDevice returns the shared device, opening it the first time.
func openDevice() (*device, error) {
	openOnce.Do(func() { shared, openErr = open() })
	return shared, openErr
}

// BackendEnv is the environment variable that chooses the WebGPU backend
// the device is opened on: vulkan, gl, metal or dx12; empty (or unset)
// leaves the choice to WebGPU.
const BackendEnv = "KILN_GPU_BACKEND"

// parseBackend maps a KILN_GPU_BACKEND value to the instance's backends;
// nil stands for WebGPU's default choice.
func parseBackend(v string) (*wgpu.InstanceDescriptor, error) {
	var b wgpu.InstanceBackend
	switch v {
	case "":
		return nil, nil
	case "vulkan":
		b = wgpu.InstanceBackendVulkan
	case "gl":
		b = wgpu.InstanceBackendGL
	case "metal":
		b = wgpu.InstanceBackendMetal
	case "dx12":
		b = wgpu.InstanceBackendDX12
	default:
		return nil, fmt.Errorf("%s=%q: expected vulkan, gl, metal, dx12 or empty", BackendEnv, v)
	}
	return &wgpu.InstanceDescriptor{Backends: b}, nil
}

func open() (*device, error) {
	wgpu.SetLogLevel(wgpu.LogLevelOff)
	backend := os.Getenv(BackendEnv)
	desc, err := parseBackend(backend)
	if err != nil {
		return nil, err
	}
	inst := wgpu.CreateInstance(desc)
	if inst == nil {
		return nil, fmt.Errorf("no WebGPU instance could be created")
	}
	ad, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{PowerPreference: wgpu.PowerPreferenceHighPerformance})
	if err != nil || ad == nil {
		if desc != nil {
			return nil, fmt.Errorf("no GPU adapter found for %s=%s (WebGPU found no such device; unset it to let WebGPU choose)", BackendEnv, backend)
		}
		return nil, fmt.Errorf("no GPU adapter found (WebGPU found no Vulkan, Metal, D3D12 or GL device; on Linux install a Vulkan driver, e.g. mesa-vulkan-drivers)")
	}
	lim := ad.GetLimits().Limits
	info := ad.GetInfo()
	req := wgpu.DefaultLimits()
	req.MaxStorageBufferBindingSize = lim.MaxStorageBufferBindingSize
	req.MaxBufferSize = lim.MaxBufferSize
	req.MaxStorageBuffersPerShaderStage = lim.MaxStorageBuffersPerShaderStage
	req.MaxComputeWorkgroupStorageSize = lim.MaxComputeWorkgroupStorageSize
	req.MaxComputeInvocationsPerWorkgroup = lim.MaxComputeInvocationsPerWorkgroup
	req.MaxComputeWorkgroupSizeX = lim.MaxComputeWorkgroupSizeX
	req.MaxComputeWorkgroupSizeY = lim.MaxComputeWorkgroupSizeY
	dev, err := ad.RequestDevice(&wgpu.DeviceDescriptor{Label: "kiln", RequiredLimits: &wgpu.RequiredLimits{Limits: req}})
	if err != nil || dev == nil {
		return nil, fmt.Errorf("the GPU adapter %q refused a device: %v", info.DriverDescription, err)
	}
	name := info.DriverDescription
	if name == "" {
		name = info.Name
	}
	return &device{dev: dev, queue: dev.GetQueue(), limits: dev.GetLimits().Limits,
		name:     fmt.Sprintf("%s (%s, %s)", name, info.BackendType, info.AdapterType),
		software: info.AdapterType == wgpu.AdapterTypeCPU}, nil
}

// Available opens the GPU if it is not open yet and returns its
// description, or the error that says why there is none.
func Available() (string, error) {
	d, err := openDevice()
	if err != nil {
		return "", err
	}
	return d.name, nil
}
