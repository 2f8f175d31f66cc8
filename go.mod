module github.com/kilnml/kiln

go 1.24.0

require (
	github.com/cogentcore/webgpu v0.23.0
	github.com/google/go-cmp v0.7.0
	gonum.org/v1/gonum v0.17.0
)
