package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/conversation"
)

func runSessionFork(ctx context.Context, e *env, args []string) error {
	const cmd = "session fork"
	fs := flagSet(e, cmd, helpText{
		usage: "SOURCE NEW [--at TURN] [--store STORE] [--plugin P] [--db PATH] [flags]",
		summary: "Starts the session NEW from the first turns of SOURCE, in rows of its own: each then\n" +
			"continues on its own.",
		examples: []string{"wasmhist session fork trip.json rome.json --at 1"},
		details: "  A turn is one input with everything its run added; --at TURN keeps the first TURN\n" +
			"  (from 1), no --at keeps all. SOURCE and NEW are session files, or with --store ids.\n" +
			"  NEW's history goes into a fresh state of SOURCE's plugin (or --plugin), granted --db\n" +
			"  (default: NEW with .db, or the store's), all or nothing. An existing NEW is refused.",
	})
	at := fs.Int("at", 0, "keep the first `TURN` turns (from 1; default: all)")
	st := storeFlags(fs)
	pluginSpec := fs.String("plugin", "", "plugin for NEW's history: inmemory, sqlite or `PATH.wasm` (default: SOURCE's)")
	dbPath := fs.String("db", "", "database for a sql plugin: SQLite `PATH`, postgres or env:VAR (default NEW.db)")
	ps := pluginFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	what := "SOURCE NEW"
	if st.set() {
		what = "SOURCE_ID NEW_ID"
	}
	switch {
	case len(pos) != 2:
		return usagef(cmd, "want %s, got %d arguments: use 'wasmhist session fork %s [--at TURN]'", what, len(pos), what)
	case *at < 0:
		return usagef(cmd, "--at %d: turns count from 1 (no --at keeps them all)", *at)
	case pos[0] == pos[1]:
		return usagef(cmd, "SOURCE and NEW are both %s: name a new session", pos[0])
	}
	a, err := sessionArgument(cmd, st, pos[:1])
	if err != nil {
		return err
	}
	defer a.close()
	s, _, f, err := a.read(ctx, e)
	if err != nil {
		return err
	}
	source := a.where(s.SessionID)
	none := ""
	from, closeFrom, err := historyPlugins(ctx, e, cmd, f, s, slotFlags{plugin: &none, db: &none, ps: ps, store: st})
	if err != nil {
		return err
	}
	defer closeFrom()

	d := &docImport{cmd: cmd, e: e, store: st, plugin: *pluginSpec, db: *dbPath, ps: ps}
	newID := pos[1]
	if st.set() {
		d.sa = a // the same store, open already
	} else {
		nf, err := parseSessionFile(cmd, pos[1])
		if err != nil {
			return err
		}
		d.file, newID = &nf, nf.name
	}
	defer d.close(ctx)
	target := d.where(newID)
	saver, defaultDB, err := d.saver(ctx, newID)
	if err != nil {
		return err
	}
	names := map[string]string{}
	for _, k := range slotKeys(s) {
		names[k] = s.State[k].Provider
	}
	plugins, db, err := d.plugins(ctx, names, defaultDB)
	if err != nil {
		return err
	}
	fork, err := conversation.Fork(ctx, s, from, *at, conversation.Target{Store: saver, Plugins: plugins, Log: warnLogger(e.stderr, cmd)}, newID)
	switch {
	case err == nil:
	case interrupted(ctx, err):
		return failf(cmd, "%w while %s was forked: nothing was written", errInterrupted, source)
	case errors.Is(err, conversation.ErrNoSuchTurn):
		return failf(cmd, "forking %s: %w; nothing was written", source, err)
	case errors.Is(err, conversation.ErrSessionExists):
		return &quietError{msg: fmt.Sprintf("wasmhist %s: %s already holds session %s: fork into a new name", cmd, d.place(), newID), err: err}
	default:
		return failf(cmd, "forking %s into %s: %w: nothing was written", source, target, err)
	}
	turns := "all turns"
	if *at > 0 {
		turns = fmt.Sprintf("turns 1 to %d", *at)
	}
	line := fmt.Sprintf("forked %s (%s) into %s: session %s, revision %d, state slots: %s", source, turns, target, fork.SessionID, fork.Revision, describeSlots(fork))
	if db != "" {
		line += ", database " + db
	}
	fmt.Fprintln(e.stdout, line)
	return nil
}
