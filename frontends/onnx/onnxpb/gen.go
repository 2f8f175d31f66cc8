// Package onnxpb is the ONNX protobuf schema (onnx.proto from ONNX 1.12,
// Apache-2.0) compiled to Go. The generated file is committed, so building
// kiln never needs protoc; regenerate with go generate after replacing
// onnx.proto (protoc from protobuf-compiler and protoc-gen-go on PATH).
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go_opt=Monnx.proto=github.com/kilnml/kiln/frontends/onnx/onnxpb onnx.proto
