package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/wasmhist/wasmhist/host/session"
)

func runSessionValidate(ctx context.Context, e *env, args []string) error {
	const cmd = "session validate"
	fs := flagSet(e, cmd, helpText{
		usage: "FILE|ID [--store STORE] [--plugin P] [--db PATH] [flags]",
		summary: "Checks that a session is one chat can resume: JSON matching schemas/session.json, and every\n" +
			"slot read by its plugin as chat would. Prints OK and a summary, or what is wrong and where.",
		examples: []string{"wasmhist session validate trip.json"},
		details: "  Each slot's state is checked against its plugin's state_schema and every stored message\n" +
			"  decoded, and each database must hold the session at the revision the session records\n" +
			"  (not an older copy), as chat checks. The plugin of a slot is the built-in one it names,\n" +
			"  or --plugin. A slot whose plugin is not found is not checked, and the OK line says so.",
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
	s, _, f, err := a.read(ctx, e)
	if err != nil {
		return err
	}
	path := a.where("")
	checked, err := checkSlots(ctx, e, cmd, f, s, path, *pluginSpec, *dbPath, ps)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("OK: %s: session %s, schema version %d, revision %d, state slots: %s",
		path, s.SessionID, s.SchemaVersion, s.Revision, describeSlots(s))
	if len(checked) > 0 {
		line += "; " + strings.Join(checked, "; ")
	}
	fmt.Fprintln(e.stdout, line)
	return nil
}

// checkSlots has each slot's plugin read the session's state as chat
// would, and returns what was checked, or the error saying what is wrong
// and where (the one session validate prints, and session import refuses
// with). path names the session in messages.
func checkSlots(ctx context.Context, e *env, cmd string, f sessionFile, s *session.Session, path, pluginSpec, dbPath string, ps *pluginSettings) ([]string, error) {
	if len(s.State) == 0 {
		return nil, nil
	}
	var checked, problems []string
	sp, err := loadSlotPlugins(ctx, e, cmd, f, s, pluginSpec, dbPath, ps)
	if err != nil {
		return nil, err
	}
	defer sp.close(ctx)
	for _, k := range slotKeys(s) {
		p, why := sp.plugin(s, k)
		if p == nil {
			checked = append(checked, fmt.Sprintf("%s: state not checked: %s", k, why))
			continue
		}
		n, err := sp.readSlot(ctx, p, s, k)
		switch {
		case interrupted(ctx, err):
			return nil, failf(cmd, "%w while slot %q of %s was read: nothing was changed; run the command again to check it", errInterrupted, k, path)
		case err != nil:
			problems = append(problems, fmt.Sprintf("slot %q (data at /state/%s/data) is not readable by plugin %s: %v", k, k, describePlugin(p), err))
		case n < 0:
			checked = append(checked, fmt.Sprintf("%s: state read by plugin %s %s (it cannot list messages)", k, p.Info().Name, p.Info().Version))
		default:
			checked = append(checked, fmt.Sprintf("%s: %d stored messages read by plugin %s %s", k, n, p.Info().Name, p.Info().Version))
		}
	}
	if len(problems) == 0 {
		// What a chat checks before its first model call, too.
		if err := sp.behind(ctx, s); err != nil {
			if interrupted(ctx, err) {
				return nil, failf(cmd, "%w while the databases of %s were read: nothing was changed; run the command again to check it", errInterrupted, path)
			}
			return nil, failf(cmd, "%s is not a session chat can resume: %s", path, oneLine(err.Error()))
		}
	}
	if len(problems) > 0 {
		return nil, failf(cmd, "%s is not a session chat can resume: %s: repair or clear the state at the place named, or start a new session",
			path, strings.Join(problems, "; "))
	}
	return checked, nil
}
