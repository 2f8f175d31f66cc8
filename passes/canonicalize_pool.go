package passes

import (
	"github.com/kilnml/kiln/ir"
)

// canonicalizePoolRelu turns max_pool2d(relu(x)) into relu(max_pool2d(x)),
// before autodiff, so that the relu and its gradient work on the pooled
// tensor (a quarter of the elements under 2×2 windows) rather than on the
// layer's whole output: a convolution, relu, max-pool block as written by
// hand and by the ONNX importer.
//
// The two are the same function, and the rewritten graph's gradient has
// the same bits. relu is non-decreasing and maps no two positive inputs
// to one value, so a window whose maximum is positive (or NaN) takes it
// at the same tap either way, and relu of that maximum is the maximum of
// the relus. A window whose maximum is <= 0 gives +0 either way; its
// gradient is 0 either way: relu_grad zeroes it at the tap pooling
// picked in relu(x) (whose value there is +0), and relu_grad of the pooled
// +0 zeroes the window's dy before pooling's gradient routes it. Every
// other input element gets the same window gradients in the same order,
// each kept or zeroed by the same test, x > 0. Only windows that hold no
// input element (possible with dilation and padding) would differ, -inf
// against +0, so a pooling with such a window is left alone.
//
// The relu must have no other user and be no output; the rewrite is in
// place: the relu's value becomes the pooling (of x's type and the
// pooled shape), renamed after the pooling's value with ".max" (%p.max),
// and the pooling's value, keeping its id and name, the relu of it.
func canonicalizePoolRelu(g *ir.Graph) error {
	pinned := g.RootMask()
	users := g.Users()
	for i := range g.Values {
		p := &g.Values[i]
		if p.Op != ir.OpMaxPool2d {
			continue
		}
		r := p.Args[0]
		rv := &g.Values[r]
		if rv.Op != ir.OpRelu || pinned[r] || len(users[r]) != 1 {
			continue
		}
		pg, err := ir.PoolGeometry(rv.Type.Shape, p.Attrs)
		if err != nil || !poolWindowsHoldInput(pg) {
			continue
		}
		rv.Op, rv.Args, rv.Attrs, rv.Type = ir.OpMaxPool2d, []ir.ID{rv.Args[0]}, p.Attrs, p.Type
		p.Op, p.Args, p.Attrs = ir.OpRelu, []ir.ID{r}, nil
		if err := g.Rename(r, g.UniqueName(p.Name+".max")); err != nil {
			return err
		}
	}
	return nil
}

// poolWindowsHoldInput reports whether every window of the pooling g
// holds at least one input element (not only padding).
func poolWindowsHoldInput(g ir.PoolGeom) bool {
	axis := func(n, out, k, stride, pad, dil int) bool {
		for o := range out {
			start := o*stride - pad
			hit := false
			for t := range k {
				if at := start + t*dil; at >= 0 && at < n {
					hit = true
					break
				}
			}
			if !hit {
				return false
			}
		}
		return true
	}
	return axis(g.H, g.OH, g.Kernel[0], g.Stride[0], g.Padding[0], g.Dilation[0]) &&
		axis(g.W, g.OW, g.Kernel[1], g.Stride[1], g.Padding[1], g.Dilation[1])
}
