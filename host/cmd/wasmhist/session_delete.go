package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
)

func runSessionDelete(ctx context.Context, e *env, args []string) error {
	const cmd = "session delete"
	fs := flagSet(e, cmd, helpText{
		usage: "FILE|ID [--store STORE] [--force] [flags]",
		summary: "Deletes a session: each slot's plugin clears what it stored (rows in a database must not\n" +
			"outlive it), then the file or the store's row is removed.",
		examples: []string{"wasmhist session delete copy.json"},
		details: "  A slot whose plugin is not found, has no clear export, or whose database does not exist\n" +
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
	var cleared, remain []string
	if len(s.State) > 0 {
		sp, err := loadSlotPlugins(ctx, e, cmd, f, s, *sf.plugin, *sf.db, sf.ps)
		if err != nil {
			return err
		}
		defer sp.close(ctx)
		if cleared, remain, err = clearSlots(ctx, cmd, a.where(""), sp, s, *force); err != nil {
			return err
		}
	}
	if err := removeSession(ctx, cmd, a, s); err != nil {
		return err
	}
	printDeleted(e.stdout, a.where(""), s, cleared, remain)
	return nil
}

// clearSlots has the plugin of every slot of s clear what it stored for
// the session, and returns the slots cleared and, as --force allows, what
// remains. Every slot is checked before any is cleared, and the clears
// run in one transaction, so that a refusal changes nothing.
func clearSlots(ctx context.Context, cmd, path string, sp *slotPlugins, s *session.Session, force bool) (cleared, remain []string, err error) {
	var toClear []string
	for _, k := range slotKeys(s) {
		p, why := sp.plugin(s, k)
		switch {
		case p == nil:
			remain = append(remain, fmt.Sprintf("slot %q: %s, so whatever it stored outside the session would remain", k, why))
		case !slices.Contains(p.Exports(), abi.ExportClear):
			remain = append(remain, fmt.Sprintf("slot %q: plugin %s has no clear export, so whatever it stored outside the session would remain", k, p.Info().Name))
		default:
			if err := sp.checkDB(p); err != nil {
				remain = append(remain, fmt.Sprintf("slot %q: %v; its rows there would remain", k, err))
				continue
			}
			toClear = append(toClear, k)
		}
	}
	if len(remain) > 0 && !force {
		return nil, nil, failf(cmd, "%s: %s: pass --force to remove the file anyway", path, strings.Join(remain, "; "))
	}
	// A plugin may export clear and still answer that it does not
	// implement it; that is known only by calling it. The clears run in
	// one transaction per database, which also deletes the session's
	// journal row there: the agent would otherwise restore the deleted
	// session into a new one of the same id.
	tx := txn.New()
	defer tx.Rollback(ctx)
	tctx := txn.With(ctx, tx)
	for _, k := range toClear {
		p, _ := sp.plugin(s, k)
		err := p.Clear(tctx, s, k)
		switch {
		case errors.Is(err, host.ErrUnsupported):
			r := fmt.Sprintf("slot %q: plugin %s does not implement clear, so whatever it stored outside the session would remain", k, p.Info().Name)
			if !force {
				// The clears so far roll back with tx: nothing changed.
				return nil, nil, failf(cmd, "%s: %s: nothing was cleared; pass --force to remove the file anyway", path, r)
			}
			remain = append(remain, r)
		case interrupted(ctx, err):
			return nil, nil, failf(cmd, "%w while slot %q of %s was cleared: nothing was cleared and the file was kept", errInterrupted, k, path)
		case err != nil:
			return nil, nil, failf(cmd, "clearing slot %q of %s through plugin %s: %w: the file was kept; check the session with 'wasmhist session validate %s'", k, path, describePlugin(p), err, path)
		default:
			cleared = append(cleared, k)
		}
	}
	for _, target := range tx.Targets() {
		if err := tx.Delete(ctx, target, txn.Journal, s.SessionID); err != nil {
			return nil, nil, failf(cmd, "clearing %s: %w: nothing was cleared; check the database", path, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, failf(cmd, "clearing %s: %w: nothing was cleared; check the database", path, err)
	}
	return cleared, remain, nil
}

// removeSession removes the session s read from a, unless a chat
// committed it meanwhile: that chat stored more than was cleared.
func removeSession(ctx context.Context, cmd string, a *sessionArg, s *session.Session) error {
	path := a.where("")
	if a.inStore() {
		// The store refuses the delete if a chat committed meanwhile.
		if err := a.st.Delete(ctx, s.SessionID, s.Revision); err != nil {
			if errors.Is(err, session.ErrStaleRevision) {
				return failf(cmd, "%s changed while it was being deleted (it was at revision %d): run the command again when no chat is using it", path, s.Revision)
			}
			return failf(cmd, "deleting %s: %w: its plugins' stored history was cleared; check the store", path, err)
		}
		return nil
	}
	now, _, err := readSessionFile(cmd, path)
	if err != nil {
		return err
	}
	if now.Revision != s.Revision {
		return failf(cmd, "%s changed while it was being deleted (revision %d, now %d): run the command again when no chat is using it", path, s.Revision, now.Revision)
	}
	if err := os.Remove(path); err != nil {
		return failf(cmd, "removing %s: %w: its plugins' stored history was cleared; remove the file by hand", path, err)
	}
	return nil
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
