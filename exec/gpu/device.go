//go:build cgo

package gpu

import (
	"fmt"
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

func open() (*device, error) {
	wgpu.SetLogLevel(wgpu.LogLevelOff)
	inst := wgpu.CreateInstance(nil)
	if inst == nil {
		return nil, fmt.Errorf("no WebGPU instance could be created")
	}
	ad, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{PowerPreference: wgpu.PowerPreferenceHighPerformance})
	if err != nil || ad == nil {
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
