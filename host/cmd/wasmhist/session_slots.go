package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
)

// slotPlugins are the plugins of a session's slots, loaded as history
// loads the plugin of its slot: a built-in plugin by the name the slot
// records, any other through --plugin, with the sql capability granted on
// the session's database.
type slotPlugins struct {
	host *host.Host
	db   string
	// byName holds the loaded plugins by their name.
	byName map[string]*host.Plugin
	// missing says why a slot's plugin was not loaded, by plugin name.
	missing map[string]string
	// needDB is the advice when db is "" (see needDB).
	needDB string
}

// loadSlotPlugins loads the plugin of every slot of s. A plugin that
// cannot be found is recorded in missing rather than failing; every
// other failure (a bad --plugin, a plugin that does not load) is an error.
func loadSlotPlugins(ctx context.Context, e *env, cmd string, f sessionFile, s *session.Session, pluginSpec, dbPath string, ps *pluginSettings) (_ *slotPlugins, err error) {
	sp := &slotPlugins{db: dbPath, byName: map[string]*host.Plugin{}, missing: map[string]string{}, needDB: needDB(s)}
	if sp.db == "" {
		sp.db = f.historyDB(e, s)
	}
	grants := []host.Grant{sqlgrant.New(sqlgrant.Config{PathFunc: func(context.Context) (string, error) {
		return "", errors.New("no database given: pass --db")
	}})}
	if sp.db != "" {
		if grants, err = dbGrantsFor(e, cmd, sp.db); err != nil {
			return nil, err
		}
	}
	if sp.host, err = newHost(ctx, e, cmd, ps); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			sp.close(ctx)
		}
	}()
	if pluginSpec != "" {
		path, err := resolvePlugin(e, cmd, pluginSpec)
		if err != nil {
			return nil, err
		}
		p, err := loadPlugin(ctx, e, sp.host, cmd, path, grants, ps)
		if err != nil {
			return nil, err
		}
		name := p.Info().Name
		if len(s.State) > 0 && !slices.ContainsFunc(slotKeys(s), func(k string) bool { return s.State[k].Provider == name }) {
			return nil, usagef(cmd, "--plugin %s is plugin %q, which keeps no slot of session %s (%s): pass the plugin of one of its slots, or drop --plugin",
				pluginSpec, name, f.path, describeSlots(s))
		}
		sp.byName[name] = p
	}
	for _, k := range slotKeys(s) {
		name := s.State[k].Provider
		if _, ok := sp.byName[name]; ok {
			continue
		}
		if _, ok := sp.missing[name]; ok {
			continue
		}
		if !slices.Contains(builtinPlugins, name) {
			sp.missing[name] = fmt.Sprintf("plugin %s not found; pass --plugin", name)
			continue
		}
		path, err := resolvePlugin(e, cmd, name)
		if errors.Is(err, errPluginNotFound) {
			sp.missing[name] = fmt.Sprintf("plugin %s not found (not built); run `make plugins`, set %s, or pass --plugin", name, pluginDirEnv)
			continue
		}
		if err != nil {
			return nil, err
		}
		p, err := loadPlugin(ctx, e, sp.host, cmd, path, grants, ps)
		if err != nil {
			return nil, err
		}
		if p.Info().Name != name {
			return nil, failf(cmd, "built-in plugin %s at %s calls itself %q: rebuild the plugins with `make plugins`", name, path, p.Info().Name)
		}
		sp.byName[name] = p
	}
	return sp, nil
}

func (sp *slotPlugins) close(ctx context.Context) {
	sp.host.Close(context.WithoutCancel(ctx))
}

// plugin returns the plugin of the slot at key, or why there is none.
func (sp *slotPlugins) plugin(s *session.Session, key string) (*host.Plugin, string) {
	name := s.State[key].Provider
	if p, ok := sp.byName[name]; ok {
		return p, ""
	}
	return nil, sp.missing[name]
}

// behind is conversation.CheckHeld for the slots of s whose plugin was
// loaded: an error when a database holds an older revision of s than s
// records, or none of it, which a chat refuses.
func (sp *slotPlugins) behind(ctx context.Context, s *session.Session) error {
	plugins := map[string]*host.Plugin{}
	for _, k := range slotKeys(s) {
		// Not a database that is missing: opening it would create it.
		if p, _ := sp.plugin(s, k); p != nil && sp.checkDB(p) == nil {
			plugins[k] = p
		}
	}
	return conversation.CheckHeld(ctx, s, plugins)
}

// warnBehind notes on standard error, for a command that reads a
// session's history and goes on, that a database is behind the session
// (err, from behind): a chat would refuse it. what says what the
// command's output then shows.
func warnBehind(ctx context.Context, e *env, cmd string, err error, what string) {
	if err != nil && !interrupted(ctx, err) {
		fmt.Fprintf(e.stderr, "wasmhist %s: warning: %s; %s\n", cmd, oneLine(err.Error()), what)
	}
}

// errNoDatabase is a plugin's database that does not exist: reading it
// would create an empty one and find nothing, which is not what the
// session holds.
var errNoDatabase = errors.New("database does not exist")

// checkDB refuses to run a plugin that keeps history in a database when
// that database does not exist.
func (sp *slotPlugins) checkDB(p *host.Plugin) error {
	if !wantsSQL(p) {
		return nil
	}
	if sp.db == "" {
		return fmt.Errorf("plugin %s keeps history in a database, and none was given or found: %s", p.Info().Name, sp.needDB)
	}
	return dbExists(p, sp.db)
}

// dbExists refuses to read through a plugin that keeps history in a
// database when db, an SQLite file, does not exist: opening it would
// create an empty one, and the history read from it would be none. A
// PostgreSQL database (--db postgres, env:VAR) is the server's to know.
func dbExists(p *host.Plugin, db string) error {
	if !wantsSQL(p) {
		return nil
	}
	if _, pg := pgDBEnv(db); pg {
		return nil
	}
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("plugin %s keeps history in database %s, which %w: pass --db with the database the session was chatted with", p.Info().Name, db, errNoDatabase)
	}
	return nil
}

// readSlot has the plugin read the slot at key as a run would: every page
// of its list export when it has one (the state is validated against the
// plugin's state_schema and every stored message is decoded), else its
// provide export with no request. It returns the number of messages
// listed, or -1 when the plugin cannot list. s is not changed.
func (sp *slotPlugins) readSlot(ctx context.Context, p *host.Plugin, s *session.Session, key string) (int, error) {
	if err := sp.checkDB(p); err != nil {
		return 0, err
	}
	if !slices.Contains(p.Exports(), abi.ExportList) {
		_, err := p.Provider(key).Provide(ctx, s.Clone(), nil)
		return -1, err
	}
	n := 0
	for page, err := range p.Pages(ctx, s, key, historyPage) {
		if err != nil {
			if n > 0 {
				return n, fmt.Errorf("reading the stored messages from number %d on: %w", n+1, err)
			}
			return n, err
		}
		n += len(page)
	}
	return n, nil
}

// slotFlags are the flags of the subcommands that load the plugin of each
// state slot: which plugin, which database, and the plugin settings.
type slotFlags struct {
	plugin, db *string
	ps         *pluginSettings
	store      *storeFlag
}

func addSlotFlags(fs *flags) slotFlags {
	return slotFlags{
		plugin: fs.String("plugin", "", "plugin: inmemory, sqlite or `PATH.wasm` (default: the one each slot names)"),
		db:     fs.String("db", "", "the plugin's database: SQLite `PATH`, postgres or env:VAR (default FILE.db)"),
		ps:     pluginFlags(fs),
		store:  storeFlags(fs),
	}
}
