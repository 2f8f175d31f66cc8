module github.com/kilnml/kiln

go 1.24

require (
	github.com/google/go-cmp v0.7.0 // indirect
	gonum.org/v1/gonum v0.17.0 // indirect
)
