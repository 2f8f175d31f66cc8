package planner

import (
	"bytes"
)

// The plan file's JSON document, for tests that rewrite it.
type (
	FilePayload = filePayload
	PlanJSON    = planJSON
	BufferJSON  = bufferJSON
	StepJSON    = stepJSON
)

// Pack lays out a plan file of the given version around doc and data, with
// the lengths and the checksum that match them.
func Pack(version uint32, doc, data []byte) []byte { return pack(version, doc, data) }

// Unpack splits an encoded plan file into its version, JSON document and
// data, checking its header and checksum.
func Unpack(file []byte) (version uint32, doc, data []byte, err error) {
	return unpack(bytes.NewReader(file))
}

// Overlap exposes Check's overlap test.
func (p *Plan) Overlap() error { return p.overlap() }
