package host

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/session"
)

// Provenance says where the provider keeps a session's history for the
// calls made with ctx: the plugin's name, version and sha256, and the
// storage its grants name (for the sql capability, "sqlite:/abs/path" or
// "postgres:NAME"; never a secret). Only grants of capabilities the
// plugin asked for count: a grant the plugin never uses holds none of its
// history. A plugin granted nothing records no storage.
//
// Package host/agent records it in the session at every commit and
// refuses to resume a session whose slot another build or another
// storage wrote.
func (pp *Provider) Provenance(ctx context.Context) (session.Provenance, error) {
	p := pp.p
	pr := session.Provenance{Plugin: p.info.Name, Version: p.info.Version, SHA256: p.sum}
	var targets []string
	for _, g := range p.grants {
		if !slices.Contains(p.info.Capabilities, g.Capability()) {
			continue
		}
		j, ok := g.(capability.Joiner)
		if !ok {
			continue
		}
		t, err := j.Target(ctx)
		if err != nil {
			return session.Provenance{}, &PluginError{Plugin: p.name, Export: "provenance", Err: fmt.Errorf("naming the storage of grant %q: %w", g.Capability(), err)}
		}
		targets = append(targets, t)
	}
	slices.Sort(targets)
	pr.Storage = strings.Join(targets, " ")
	return pr, nil
}
