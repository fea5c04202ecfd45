package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/session"
)

func runSessionShow(ctx context.Context, e *env, args []string) error {
	const cmd = "session show"
	fs := flagSet(e, cmd, helpText{
		usage: "FILE|ID [--store STORE] [--plugin P] [--db PATH] [flags]",
		summary: "Summarizes a session: id, revision, service conversation, and per slot its plugin, state\n" +
			"version and size, and the number of stored messages when the plugin can list them.",
		examples: []string{"wasmhist session show trip.json", "wasmhist session show --store sessions.db trip-2"},
	})
	sf := addSlotFlags(fs)
	pluginSpec, dbPath, ps := sf.plugin, sf.db, sf.ps
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	a, err := sessionArgument(cmd, sf.store, pos)
	if err != nil {
		return err
	}
	defer a.close()
	s, b, f, err := a.read(ctx, e)
	if err != nil {
		return err
	}
	path := a.where("")
	w := e.stdout
	fmt.Fprintf(w, "file:                 %s (%d bytes)\n", path, len(b))
	fmt.Fprintf(w, "session:              %s\n", s.SessionID)
	fmt.Fprintf(w, "schema version:       %d\n", s.SchemaVersion)
	fmt.Fprintf(w, "revision:             %d\n", s.Revision)
	service := s.ServiceSessionID
	if service == "" {
		service = "none"
	}
	fmt.Fprintf(w, "service conversation: %s\n", service)
	if len(s.State) == 0 {
		fmt.Fprintln(w, "slots:                none")
		return nil
	}
	sp, err := loadSlotPlugins(ctx, e, cmd, f, s, *pluginSpec, *dbPath, ps)
	if err != nil {
		return err
	}
	defer sp.close(ctx)
	fmt.Fprintln(w, "slots:")
	for _, k := range slotKeys(s) {
		st := s.State[k]
		n := countMessages(ctx, sp, s, k)
		if interrupted(ctx, nil) {
			return failf(cmd, "%w while the messages of slot %q of %s were counted", errInterrupted, k, path)
		}
		fmt.Fprintf(w, "  %s: plugin %s, state version %d, state %d bytes, %s\n", k, st.Provider, st.StateVersion, len(st.Data), n)
	}
	warnBehind(ctx, e, cmd, sp.behind(ctx, s), "the messages counted are what the database holds")
	return nil
}

// countMessages says how many messages the plugin of a slot stored, or why
// they were not counted.
func countMessages(ctx context.Context, sp *slotPlugins, s *session.Session, key string) string {
	p, why := sp.plugin(s, key)
	if p == nil {
		return "messages not counted: " + why
	}
	if !slices.Contains(p.Exports(), abi.ExportList) {
		return fmt.Sprintf("messages not counted: plugin %s has no list export", p.Info().Name)
	}
	n, err := sp.readSlot(ctx, p, s, key)
	if err != nil {
		return fmt.Sprintf("messages not counted: %s (run 'wasmhist session validate')", oneLine(err.Error()))
	}
	where := ""
	if wantsSQL(p) {
		where = " in database " + sp.db
	}
	return fmt.Sprintf("%d messages stored%s", n, where)
}
