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

// HeldRevisions says, for each storage Provenance names (by the same
// target names), the newest revision of session id that it records: the
// revision of the session row or the journal row the host wrote there with
// the session's last commit into it, or 0 when it holds nothing of the
// session. It reads, in a transaction of its own, and changes nothing.
//
// Package host/agent compares it with the revision the session recorded,
// so that a session moved, copied or restored together with its database
// resumes wherever they are, and a database that does not hold the session
// at that revision is refused.
func (pp *Provider) HeldRevisions(ctx context.Context, sessionID string) (map[string]int64, error) {
	p := pp.p
	held := map[string]int64{}
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
			return nil, &PluginError{Plugin: p.name, Export: "provenance", Err: fmt.Errorf("naming the storage of grant %q: %w", g.Capability(), err)}
		}
		rev, err := p.host.backends.HeldRevision(ctx, g, sessionID)
		if err != nil {
			return nil, &PluginError{Plugin: p.name, Export: "provenance", Err: fmt.Errorf("reading what %s holds of session %q: %w", t, sessionID, err)}
		}
		held[t] = max(held[t], rev)
	}
	return held, nil
}
