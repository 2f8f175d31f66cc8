//go:build cgo

package gpu

import (
	"testing"

	"github.com/cogentcore/webgpu/wgpu"
)

// TestParseBackend checks every KILN_GPU_BACKEND value: the four backends,
// empty for WebGPU's choice, and a one-line error naming the variable and
// the value otherwise.
func TestParseBackend(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want wgpu.InstanceBackend
		def  bool
		err  string
	}{
		{in: "", def: true},
		{in: "vulkan", want: wgpu.InstanceBackendVulkan},
		{in: "gl", want: wgpu.InstanceBackendGL},
		{in: "metal", want: wgpu.InstanceBackendMetal},
		{in: "dx12", want: wgpu.InstanceBackendDX12},
		{in: "GL", err: `KILN_GPU_BACKEND="GL": expected vulkan, gl, metal, dx12 or empty`},
		{in: "opengl", err: `KILN_GPU_BACKEND="opengl": expected vulkan, gl, metal, dx12 or empty`},
	} {
		d, err := parseBackend(tc.in)
		switch {
		case tc.err != "":
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.def:
			if d != nil {
				t.Errorf("%q: backends %v, want WebGPU's default", tc.in, d.Backends)
			}
		case d == nil || d.Backends != tc.want:
			t.Errorf("%q: descriptor %+v, want backends %v", tc.in, d, tc.want)
		}
	}
}
