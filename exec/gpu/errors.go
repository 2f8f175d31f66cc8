package gpu

// NotChunkedError is the error of New for a plan placed without chunks (or
// in chunks larger than this device binds) that the device cannot bind as
// it is. Problem says what does not fit; Error adds how to compile the
// plan for the GPU with the Go API (a command-line tool names its own
// flag instead).
type NotChunkedError struct {
	Problem string
}

func (e *NotChunkedError) Error() string {
	return e.Problem + "; compile the plan for the GPU (kiln.Options.Device \"gpu\", or planner.Options.ChunkBytes)"
}
