package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
)

func runSessionMigrate(ctx context.Context, e *env, args []string) error {
	const cmd = "session migrate"
	fs := flagSet(e, cmd, helpText{
		usage: "--from STORE --to STORE [--db PATH] [flags]",
		summary: "Copies every session of the store --from, with its history, into the store --to, each\n" +
			"all or nothing, keeping ids and revisions: the way from SQLite to PostgreSQL.",
		examples: []string{"wasmhist session migrate --from sessions.db --to archive/"},
		details: "  Each slot is read through its plugin from the database the session records and written\n" +
			"  into a fresh state of the same plugin granted --db (default: the destination's own\n" +
			"  database: its SQLite file, ID.db beside a directory's session, or with --to postgres a\n" +
			"  schema of that database). One line per session (copied, updated, unchanged, diverged)\n" +
			"  and a count. Run it again to resume: a session already there at its revision is left\n" +
			"  unchanged, an older one replaced, one chatted on in the destination since left alone.\n" +
			"  The source is only read. On a terminal, progress is shown on standard error.",
	})
	from := &storeFlag{}
	fs.Var(from, "from", "the `STORE` to read: a directory, an SQLite file, postgres or env:VAR")
	to := &storeFlag{}
	fs.Var(to, "to", "the `STORE` to write, as --from")
	db := fs.String("db", "", "destination plugins' database: SQLite `PATH`, postgres or env:VAR")
	ps := pluginFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef(cmd, "takes no arguments, got %d: use 'wasmhist %s --from STORE --to STORE'", len(pos), cmd)
	case !from.set() || !to.set():
		return usagef(cmd, "needs --from and --to: use 'wasmhist %s --from sessions.db --to postgres'", cmd)
	case from.raw == to.raw:
		return usagef(cmd, "--from and --to are both %s: name two stores", from.raw)
	}
	src, err := from.open(ctx, e, cmd)
	if err != nil {
		return err
	}
	defer src.close()
	dst, err := to.open(ctx, e, cmd)
	if err != nil {
		return err
	}
	defer dst.close()
	h, err := newHost(ctx, e, cmd, ps)
	if err != nil {
		return err
	}
	defer h.Close(context.WithoutCancel(ctx))
	sp := &storePlugins{e: e, cmd: cmd, host: h, ps: ps, loaded: map[[2]string]*host.Plugin{}}
	toDB := func(s *session.Session) string {
		switch {
		case *db != "":
			return *db
		case to.kind == storePostgres:
			return to.raw
		}
		return to.defaultDB(s.SessionID)
	}
	var counts = map[conversation.Outcome]int{}
	pr := newProgress(e, cmd, true)
	total := 0
	defer pr.done()
	done, err := conversation.Migrate(ctx,
		conversation.Source{Store: src, Plugins: sp.recorded(from)},
		conversation.Destination{Store: dst, Plugins: sp.on(toDB)},
		&conversation.MigrateOptions{Progress: func(m conversation.Migrated) {
			counts[m.Outcome]++
			line := fmt.Sprintf("%s %s (revision %d", m.Outcome, m.SessionID, m.Revision)
			if m.Outcome == conversation.Copied || m.Outcome == conversation.Updated {
				line += fmt.Sprintf(", %d messages", m.Messages)
			}
			fmt.Fprintln(e.stdout, line+")")
			total++
			pr.show("%d sessions done, %d copied or updated", total, counts[conversation.Copied]+counts[conversation.Updated])
		}})
	summary := fmt.Sprintf("%d sessions from %s to %s: %d copied, %d updated, %d unchanged, %d diverged",
		len(done), from.describe(), to.describe(), counts[conversation.Copied], counts[conversation.Updated], counts[conversation.Unchanged], counts[conversation.Diverged])
	if err != nil {
		if interrupted(ctx, err) {
			return failf(cmd, "%w after %s; the session being copied was not written: run the command again to go on", errInterrupted, summary)
		}
		return failf(cmd, "%s; stopped: %w", summary, err)
	}
	fmt.Fprintln(e.stdout, "migrated "+summary)
	return nil
}

// storePlugins loads the plugins of many sessions in one host, once per
// plugin and database, keeping the maxLoaded used last: a directory store
// gives each session a database of its own, and a plugin per database
// kept for the whole run would grow with the store.
type storePlugins struct {
	e      *env
	cmd    string
	host   *host.Host
	ps     *pluginSettings
	loaded map[[2]string]*host.Plugin // by plugin name and database
	used   map[[2]string]int          // when each was last asked for
	clock  int
	noSQL  map[string]bool // plugins that keep no history in a database
}

// maxLoaded bounds the plugins storePlugins keeps loaded. The sessions
// are handled one at a time, each with a plugin or two a side, so the
// plugins it closes belong to sessions already done.
const maxLoaded = 8

// get returns built-in plugin name granted db ("" for none).
func (sp *storePlugins) get(ctx context.Context, name, db string) (*host.Plugin, error) {
	if sp.used == nil {
		sp.used, sp.noSQL = map[[2]string]int{}, map[string]bool{}
	}
	if sp.noSQL[name] {
		db = "" // one instance serves every database
	}
	sp.clock++
	k := [2]string{name, db}
	if p, ok := sp.loaded[k]; ok {
		sp.used[k] = sp.clock
		return p, nil
	}
	if len(sp.loaded) >= maxLoaded {
		sp.evict(ctx)
	}
	if !isBuiltin(name) {
		return nil, failf(sp.cmd, "plugin %s is not a built-in plugin: this command loads only %s", name, strings.Join(builtinPlugins, " and "))
	}
	path, err := resolvePlugin(sp.e, sp.cmd, name)
	if err != nil {
		return nil, err
	}
	grants := []host.Grant{sqlgrant.New(sqlgrant.Config{PathFunc: func(context.Context) (string, error) {
		return "", errors.New("no database given: pass --db")
	}})}
	if db != "" {
		if grants, err = dbGrantsFor(sp.e, sp.cmd, db); err != nil {
			return nil, err
		}
	}
	p, err := loadPlugin(ctx, sp.e, sp.host, sp.cmd, path, grants, sp.ps)
	if err != nil {
		return nil, err
	}
	sp.loaded[k] = p
	sp.used[k] = sp.clock
	sp.noSQL[name] = !wantsSQL(p)
	return p, nil
}

// evict closes the plugin used longest ago.
func (sp *storePlugins) evict(ctx context.Context) {
	var oldest [2]string
	first := true
	for k := range sp.loaded {
		if first || sp.used[k] < sp.used[oldest] {
			oldest, first = k, false
		}
	}
	sp.loaded[oldest].Close(context.WithoutCancel(ctx))
	delete(sp.loaded, oldest)
	delete(sp.used, oldest)
}

// on is the PluginSet of the plugins each slot names, granted dbOf(s).
func (sp *storePlugins) on(dbOf func(*session.Session) string) conversation.PluginSet {
	return conversation.PluginsFunc(func(ctx context.Context, s *session.Session) (map[string]*host.Plugin, error) {
		out := map[string]*host.Plugin{}
		for _, k := range slotKeys(s) {
			p, err := sp.get(ctx, s.State[k].Provider, dbOf(s))
			if err != nil {
				return nil, err
			}
			out[k] = p
		}
		return out, nil
	})
}

// recorded is the PluginSet of the plugins each slot of a session of st
// names, granted the database the slot records: its SQLite file, or the
// PostgreSQL database of st when the slot records one.
func (sp *storePlugins) recorded(st *storeFlag) conversation.PluginSet {
	return conversation.PluginsFunc(func(ctx context.Context, s *session.Session) (map[string]*host.Plugin, error) {
		out := map[string]*host.Plugin{}
		for _, k := range slotKeys(s) {
			db := st.defaultDB(s.SessionID)
			storage := s.Provenance[k].Storage
			switch {
			case strings.HasPrefix(storage, "sqlite:"):
				db = strings.TrimPrefix(storage, "sqlite:")
			case strings.HasPrefix(storage, "postgres:") && st.kind == storePostgres:
				db = st.raw
			case strings.HasPrefix(storage, "postgres:"):
				return nil, failf(sp.cmd, "session %s: slot %q keeps its history in PostgreSQL (%s), and the store is %s: keep such sessions in that database's store (--store postgres)",
					s.SessionID, k, storage, st.describe())
			}
			p, err := sp.get(ctx, s.State[k].Provider, db)
			if err != nil {
				return nil, err
			}
			out[k] = p
		}
		return out, nil
	})
}

func isBuiltin(name string) bool {
	for _, b := range builtinPlugins {
		if b == name {
			return true
		}
	}
	return false
}
