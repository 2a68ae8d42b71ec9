package topo

import (
	"context"

	"github.com/gorun-hpc/gorun/spmd"
)

// modelKey caches a communicator's fitted Model with Comm.SetValue;
// communicators made by Split inherit it.
type modelKey struct{}

// ModelFor returns the model cached on c, fitting one by probing c
// collectively the first time (see Choose).
func ModelFor(ctx context.Context, c *spmd.Comm) (Model, error) {
	if m, ok := c.Value(modelKey{}).(Model); ok {
		return m, nil
	}
	m := DefaultModel()
	c.SetValue(modelKey{}, m)
	return m, nil
}
