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
// refuses to resume a session whose slot another plugin or another build
// wrote (unless RunOptions.AcceptNewBuild), or whose granted database does
// not hold the session at the revision the session recorded
// (HeldRevisions); a database moved or restored together with the session
// resumes where it is.
func (pp *Provider) Provenance(ctx context.Context) (session.Provenance, error) {
	p := pp.p
	pr := session.Provenance{Plugin: p.info.Name, Version: p.info.Version, SHA256: p.sum}
	var targets []string
	err := pp.storages(ctx, func(_ capability.Grant, t string) error {
		targets = append(targets, t)
		return nil
	})
	if err != nil {
		return session.Provenance{}, err
	}
	slices.Sort(targets)
	pr.Storage = strings.Join(targets, " ")
	return pr, nil
}

// storages calls f with each grant of a capability the plugin asked for
// that names a storage (capability.Joiner), and the storage's target name.
func (pp *Provider) storages(ctx context.Context, f func(g capability.Grant, target string) error) error {
	p := pp.p
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
			return &PluginError{Plugin: p.name, Export: "provenance", Err: fmt.Errorf("naming the storage of grant %q: %w", g.Capability(), err)}
		}
		if err := f(g, t); err != nil {
			return err
		}
	}
	return nil
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
	held := map[string]int64{}
	err := pp.held(ctx, sessionID, func(target string, rev int64, _ []byte) error {
		held[target] = max(held[target], rev)
		return nil
	})
	return held, err
}

// HeldSession returns the newest session of id that a storage Provenance
// names records in the host's rows (the session row or journal row the
// host wrote there with the session's last commit into it, checked as
// session.Decode checks one), with that storage's target name; nil and ""
// when none holds the session. It reads, in a transaction of its own per
// storage, and changes nothing.
//
// Package host/conversation exports it when it is newer than the session
// it was given: the session store is behind the database's journal (the
// process ended between the database's commit and the store's save), or a
// run committed since the session was loaded.
func (pp *Provider) HeldSession(ctx context.Context, sessionID string) (*session.Session, string, error) {
	var (
		newest *session.Session
		from   string
	)
	err := pp.held(ctx, sessionID, func(target string, rev int64, data []byte) error {
		if rev == 0 || (newest != nil && rev <= newest.Revision) {
			return nil
		}
		s, err := session.Decode(data)
		if err == nil && (s.SessionID != sessionID || s.Revision != rev) {
			err = fmt.Errorf("the row of revision %d holds session %q at revision %d", rev, s.SessionID, s.Revision)
		}
		if err != nil {
			return fmt.Errorf("its row is not a valid session: %w", err)
		}
		newest, from = s, target
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return newest, from, nil
}

// held calls f with what each storage Provenance names holds of session
// id in the host's rows: see capability.Backends.Held.
func (pp *Provider) held(ctx context.Context, sessionID string, f func(target string, rev int64, data []byte) error) error {
	p := pp.p
	return pp.storages(ctx, func(g capability.Grant, t string) error {
		rev, data, err := p.host.backends.Held(ctx, g, sessionID)
		if err == nil {
			err = f(t, rev, data)
		}
		if err != nil {
			return &PluginError{Plugin: p.name, Export: "provenance", Err: fmt.Errorf("reading what %s holds of session %q: %w", t, sessionID, err)}
		}
		return nil
	})
}
