package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

func runSessionDelete(ctx context.Context, e *env, args []string) error {
	const cmd = "session delete"
	fs := flagSet(e, cmd, helpText{
		usage: "FILE|ID [--store STORE] [--force] [flags]",
		summary: "Deletes a session: each slot's plugin clears what it stored (rows in a database must not\n" +
			"outlive it), then the file or the store's row is removed.",
		examples: []string{"wasmhist session delete copy.json"},
		details: "  All is refused, changing nothing, if a chat committed since the session was read.\n" +
			"  A slot whose plugin is not found, has no clear export, or whose database does not exist\n" +
			"  is refused, saying what would remain, unless --force, which removes the session and\n" +
			"  leaves what that plugin stored. --force also removes a stored session that cannot be\n" +
			"  loaded. The database file itself is kept: other sessions may use it.",
	})
	sf := addSlotFlags(fs)
	force := fs.Bool("force", false, "remove the session even when a plugin cannot clear it, or it is corrupt")
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
	if err != nil && *force && a.corrupt(err) {
		if err := a.removeCorrupt(ctx, e); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "deleted %s, which was corrupt (%s); what its plugins stored, if anything, was left: its slots could not be read\n", a.where(""), oneLine(errors.Unwrap(err).Error()))
		return nil
	}
	if err != nil {
		return err
	}
	if !a.inStore() {
		if err := checkSessionFile(cmd, &f); err != nil {
			return err
		}
	}
	var sp *slotPlugins
	if len(s.State) > 0 {
		if sp, err = loadSlotPlugins(ctx, e, cmd, f, s, *sf.plugin, *sf.db, sf.ps); err != nil {
			return err
		}
		defer sp.close(ctx)
	}
	var st sessionStore = store.NewFile(f.path)
	if a.inStore() {
		st = a.st
	}
	cleared, remain, err := eraseSession(ctx, cmd, a.where(""), sp, s, st, *force)
	if err != nil {
		return err
	}
	printDeleted(e.stdout, a.where(""), s, cleared, remain)
	return nil
}

// eraseSession deletes s from st through conversation.Erase: each slot's
// plugin clears what it stored and the session's journal rows go, in one
// transaction per database, then the session is deleted from st at the
// revision read, all refused if a chat committed meanwhile. A slot whose
// plugin cannot clear it (not found, no clear export or no implementation
// of it, its database missing) is refused before anything changes, or
// with force left as it is. It returns the slots cleared and, as force
// allowed, what remains.
func eraseSession(ctx context.Context, cmd, path string, sp *slotPlugins, s *session.Session, st sessionStore, force bool) (cleared, remain []string, err error) {
	plugins := map[string]*host.Plugin{}
	why := map[string]string{} // slots not given to Erase, and why
	for _, k := range slotKeys(s) {
		p, missing := sp.plugin(s, k)
		switch {
		case p == nil:
			why[k] = fmt.Sprintf("slot %q: %s, so whatever it stored outside the session would remain", k, missing)
		case !slices.Contains(p.Exports(), abi.ExportClear):
			why[k] = fmt.Sprintf("slot %q: plugin %s has no clear export, so whatever it stored outside the session would remain", k, p.Info().Name)
		default:
			if err := sp.checkDB(p); err != nil {
				why[k] = fmt.Sprintf("slot %q: %v; its rows there would remain", k, err)
				continue
			}
			plugins[k] = p
		}
	}
	if len(why) > 0 && !force {
		return nil, nil, failf(cmd, "%s: %s: pass --force to remove the file anyway", path, strings.Join(slices.Sorted(maps.Values(why)), "; "))
	}
	// A plugin may export clear and still answer that it does not
	// implement it; that is known only by calling it.
	left := map[string]bool{}
	refused := ""
	leave := func(u conversation.Uncleared) bool {
		r, ok := why[u.Key]
		if !ok {
			r = fmt.Sprintf("slot %q: plugin %s does not implement clear, so whatever it stored outside the session would remain", u.Key, u.Plugin)
		}
		if !force {
			refused = r
			return false
		}
		left[u.Key] = true
		remain = append(remain, r)
		return true
	}
	erased, err := conversation.Erase(ctx, s, plugins, st, &conversation.EraseOptions{Leave: leave})
	switch {
	case err == nil:
		for _, sl := range erased.Slots {
			if !left[sl.Key] {
				cleared = append(cleared, sl.Key)
			}
		}
		return cleared, remain, nil
	case refused != "":
		return nil, nil, failf(cmd, "%s: %s: nothing was cleared; pass --force to remove the file anyway", path, refused)
	case interrupted(ctx, err):
		return nil, nil, failf(cmd, "%w while %s was cleared: nothing was cleared and the file was kept", errInterrupted, path)
	case errors.Is(err, session.ErrStaleRevision):
		if cur, uerr := bringUpToDate(ctx, s, plugins, st); uerr == nil && cur != nil {
			return nil, nil, failf(cmd, "%s was at revision %d, its database at %d (a chat ended before saving the session): %s was brought up to date and nothing was deleted; run the command again to delete revision %d",
				path, s.Revision, cur.Revision, path, cur.Revision)
		}
		return nil, nil, failf(cmd, "%s changed while it was being deleted (it was at revision %d): %w: run the command again when no chat is using it", path, s.Revision, err)
	}
	return nil, nil, failf(cmd, "deleting %s: %w; check the session with 'wasmhist session validate %s'", path, err, path)
}

// sessionStore is where session delete finds the session: a session
// file, or a --store.
type sessionStore interface {
	store.Deleter
	store.Saver
}

// bringUpToDate saves into st the newest revision of s that a slot's
// database holds (conversation.Newest), as a chat does when a run finds
// the store behind a database's journal, and returns it; nil when no
// database holds a newer one, or st holds it already (a chat committed
// whole since s was read).
func bringUpToDate(ctx context.Context, s *session.Session, plugins map[string]*host.Plugin, st store.Saver) (*session.Session, error) {
	cur, err := conversation.Newest(ctx, s, plugins)
	if err != nil || cur == s {
		return nil, err
	}
	if err := st.Save(ctx, cur); err != nil {
		return nil, err
	}
	return cur, nil
}

func printDeleted(w io.Writer, path string, s *session.Session, toClear, remain []string) {
	line := fmt.Sprintf("deleted %s (session %s, revision %d)", path, s.SessionID, s.Revision)
	if len(toClear) > 0 {
		line += "; cleared: " + strings.Join(toClear, ", ")
	}
	if len(remain) > 0 {
		line += "; left as --force allowed: " + strings.Join(remain, "; ")
	}
	fmt.Fprintln(w, line)
}
