// Package gpu runs a plan on a GPU through WebGPU (wgpu-native, linked with
// cgo): every step's kernel comes from kernels/wgsl as WGSL shaders, the
// arena is one or more storage buffers on the device, and a whole step
// (forward, backward, optimizer update, update copies) is recorded into one
// command buffer and submitted once. Params and optimizer state stay on the
// device between steps; only the plan's outputs (and a few status words
// that carry data errors such as a label out of range) are read back after
// each step. Other tensors are read back on demand by Get.
//
// WebGPU facts this package relies on (verified with wgpu-native through
// github.com/cogentcore/webgpu v0.23.0 on Mesa's llvmpipe, Vulkan):
//
//   - One buffer may be bound several times in one dispatch, at disjoint,
//     overlapping or equal ranges, when every binding is read_write; a
//     read-only and a read_write binding of the same buffer in one
//     dispatch is refused ("conflicting usages"). So every binding of the
//     arena is declared read_write, and an in-place step binds the same
//     range twice.
//   - Binding offsets must be multiples of minStorageBufferOffsetAlignment
//     (32 on llvmpipe, at most 256 anywhere): the planner's 256-byte
//     alignment fits every device. Binding sizes are rounded up to 4 bytes.
//   - The device is requested with the adapter's own limits for what kiln
//     uses (maxStorageBufferBindingSize, maxBufferSize,
//     maxStorageBuffersPerShaderStage, workgroup storage and invocations),
//     the rest left at their defaults: passing the adapter's whole limits
//     struct makes the request fail.
//   - Dynamic offsets are not needed: bind groups are made once per
//     dispatch when the executor is built.
//   - Readback: a MAP_READ buffer filled by copies recorded after the
//     compute pass, then MapAsync and non-blocking Device.Poll until the
//     callback runs (about 0.15 ms on llvmpipe). A blocking poll is not
//     used: it waits at most 5 s and then takes the unfinished work as
//     done, running the callback early and freeing what the work still
//     uses (see waitFor).
//   - wgpu-native aborts the process on some invalid calls (a bind group
//     without a layout), and its device-lost callback cannot be passed
//     through the binding with cgo's pointer checks on; so the executor
//     validates sizes and limits itself before calling it, and reports a
//     lost device through the errors of the calls that fail.
package gpu
