package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
)

// sessionCommand is one subcommand of 'wasmhist session'.
type sessionCommand struct {
	name, args, summary string
	run                 func(ctx context.Context, e *env, args []string) error
}

func sessionCommands() []sessionCommand {
	return []sessionCommand{
		{"validate", "FILE", "check that FILE is a session its plugins can resume", runSessionValidate},
		{"list", "[DIR]", "list the session files in DIR (default .)", runSessionList},
		{"show", "FILE", "summarize a session: id, revision, each slot's plugin, state and messages", runSessionShow},
		{"delete", "FILE", "clear what the session's plugins stored, then remove FILE", runSessionDelete},
		{"export", "FILE", "print the session as stored, after validating it", runSessionExport},
		{"import", "FILE", "write the session read from standard input to FILE", runSessionImport},
	}
}

func runSession(ctx context.Context, e *env, args []string) error {
	// The subcommand comes first, and its flags are its own: parse the
	// session command's flags (only --help) only when no subcommand leads.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		for _, c := range sessionCommands() {
			if c.name == args[0] {
				return c.run(ctx, e, args[1:])
			}
		}
		name := args[0]
		if looksLikeConnString(name) {
			name = "(a connection string)"
		}
		return usagef("session", "unknown subcommand %q: use one of %s (see 'wasmhist session --help')", name, sessionCommandNames())
	}
	fs := flagSet(e, "session", "<subcommand> [flags] [arguments]", sessionHelp())
	pos, err := parse(fs, "session", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return runSession(ctx, e, pos)
	}
	return usagef("session", "no subcommand: use one of %s, such as 'wasmhist session validate FILE' (see 'wasmhist session --help')", sessionCommandNames())
}

func sessionHelp() string {
	var b strings.Builder
	b.WriteString("Works with session files.\n\nSubcommands:\n")
	for _, c := range sessionCommands() {
		fmt.Fprintf(&b, "  %-15s %s\n", c.name+" "+c.args, c.summary)
	}
	b.WriteString("\nRun 'wasmhist session <subcommand> --help' for a subcommand's flags.")
	return b.String()
}

func sessionCommandNames() string {
	var names []string
	for _, c := range sessionCommands() {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// onePath returns the single FILE argument of a session subcommand.
func onePath(cmd, what string, pos []string) (string, error) {
	if len(pos) != 1 {
		return "", usagef(cmd, "want exactly one %s, got %d arguments: use 'wasmhist %s %s'", what, len(pos), cmd, what)
	}
	return pos[0], nil
}

// readSessionFile reads and validates the session at path against the
// session schema, and returns it with the bytes as stored.
func readSessionFile(cmd, path string) (*session.Session, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, failf(cmd, "reading %s: %w: check the path", path, err)
	}
	s, err := decodeSession(b)
	if err != nil {
		return nil, nil, failf(cmd, "%s is not a valid session: %w: fix the file at the place named, or start a new session", path, err)
	}
	return s, b, nil
}

// slotKeys returns the session's state keys in order.
func slotKeys(s *session.Session) []string {
	keys := make([]string, 0, len(s.State))
	for k := range s.State {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

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
}

// loadSlotPlugins loads the plugin of every slot of s. A plugin that
// cannot be found is recorded in missing rather than failing; every
// other failure (a bad --plugin, a plugin that does not load) is an error.
func loadSlotPlugins(ctx context.Context, e *env, cmd string, f sessionFile, s *session.Session, pluginSpec, dbPath string, ps *pluginSettings) (_ *slotPlugins, err error) {
	sp := &slotPlugins{db: dbPath, byName: map[string]*host.Plugin{}, missing: map[string]string{}}
	if sp.db == "" {
		sp.db = f.dbPath()
	}
	grants := []host.Grant{sqlgrant.New(sqlgrant.Config{PathFunc: func(context.Context) (string, error) {
		return "", errors.New("no database given: pass --db")
	}})}
	if sp.db != "" {
		if grants, err = dbGrants(cmd, sp.db); err != nil {
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
		return fmt.Errorf("plugin %s keeps history in a database, and the store names none: pass --db with the database the session was chatted with", p.Info().Name)
	}
	if _, err := os.Stat(sp.db); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("plugin %s keeps history in database %s, which %w: pass --db with the database the session was chatted with", p.Info().Name, sp.db, errNoDatabase)
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
	n, cursor := 0, ""
	for {
		page, next, err := p.List(ctx, s, key, cursor, historyPage)
		if err != nil {
			if n > 0 {
				return n, fmt.Errorf("reading the stored messages from number %d on: %w", n+1, err)
			}
			return n, err
		}
		n += len(page)
		if next == "" {
			return n, nil
		}
		if next == cursor {
			return n, fmt.Errorf("plugin %s returned the same list cursor %q twice: the plugin's list export is broken", p.Info().Name, next)
		}
		cursor = next
	}
}

// describeSlots is "history (inmemory, state version 1), ..." or "none".
func describeSlots(s *session.Session) string {
	var slots []string
	for _, k := range slotKeys(s) {
		st := s.State[k]
		slots = append(slots, fmt.Sprintf("%s (%s, state version %d)", k, st.Provider, st.StateVersion))
	}
	if len(slots) == 0 {
		return "none"
	}
	return strings.Join(slots, ", ")
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
		plugin: fs.String("plugin", "", "plugin: inmemory, sqlite or `PATH.wasm` (default: the built-in plugin each slot names)"),
		db:     fs.String("db", "", "the plugin's SQLite database `PATH` (default: the session file with .db)"),
		ps:     pluginFlags(fs),
		store:  storeFlags(fs),
	}
}

// readSessionArg reads the one FILE argument of a subcommand as a session,
// or with --store the session of that id from the store (st, which the
// caller closes; nil without --store). path then names the session in the
// store.
func readSessionArg(ctx context.Context, e *env, cmd string, store *storeFlag, pos []string) (path string, s *session.Session, raw []byte, f sessionFile, st *openedStore, err error) {
	if store.set() {
		var id string
		if id, err = onePath(cmd, "ID", pos); err != nil {
			return
		}
		if st, err = store.open(ctx, e, cmd); err != nil {
			return
		}
		path = fmt.Sprintf("session %s in %s", id, store.describe())
		if s, err = st.Load(ctx, id); err != nil {
			st.close()
			st, err = nil, failf(cmd, "loading %s: %w: check the id ('wasmhist session list --store %s' lists them)", path, err, store.raw)
			return
		}
		if raw, err = session.Encode(s); err != nil {
			st.close()
			st, err = nil, failf(cmd, "%s is not a valid session: %w: fix it at the place named, or start a new session", path, err)
			return
		}
		f = sessionFile{path: path, name: id, inStore: true, db: store.defaultDB(id)}
		return
	}
	if path, err = onePath(cmd, "FILE", pos); err != nil {
		return
	}
	if s, raw, err = readSessionFile(cmd, path); err != nil {
		return
	}
	f, err = parseSessionFile(cmd, path)
	return
}

func runSessionValidate(ctx context.Context, e *env, args []string) error {
	const cmd = "session validate"
	fs := flagSet(e, cmd, "FILE [flags]",
		"Checks that FILE is a session chat can resume: JSON matching schemas/session.json, at the\n"+
			"schema version this host writes, and every state slot read by its plugin (its state checked\n"+
			"against the plugin's state_schema, its stored messages decoded). The plugin of a slot is the\n"+
			"built-in one it names, or --plugin. Prints OK and a summary, or one line saying what is wrong\n"+
			"and where. A slot whose plugin is not found is not checked, and the OK line says so.")
	sf := addSlotFlags(fs)
	pluginSpec, dbPath, ps := sf.plugin, sf.db, sf.ps
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	path, s, _, f, st, err := readSessionArg(ctx, e, cmd, sf.store, pos)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.close()
	}
	var checked, problems []string
	if len(s.State) > 0 {
		sp, err := loadSlotPlugins(ctx, e, cmd, f, s, *pluginSpec, *dbPath, ps)
		if err != nil {
			return err
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
			case err != nil:
				problems = append(problems, fmt.Sprintf("slot %q (data at /state/%s/data) is not readable by plugin %s: %v", k, k, describePlugin(p), err))
			case n < 0:
				checked = append(checked, fmt.Sprintf("%s: state read by plugin %s %s (it cannot list messages)", k, p.Info().Name, p.Info().Version))
			default:
				checked = append(checked, fmt.Sprintf("%s: %d stored messages read by plugin %s %s", k, n, p.Info().Name, p.Info().Version))
			}
		}
	}
	if len(problems) > 0 {
		return failf(cmd, "%s is not a session chat can resume: %s: repair or clear the state at the place named, or start a new session",
			path, strings.Join(problems, "; "))
	}
	line := fmt.Sprintf("OK: %s: session %s, schema version %d, revision %d, state slots: %s",
		path, s.SessionID, s.SchemaVersion, s.Revision, describeSlots(s))
	if len(checked) > 0 {
		line += "; " + strings.Join(checked, "; ")
	}
	fmt.Fprintln(e.stdout, line)
	return nil
}

// decodeSession is host.DecodeSession: it says where a document is wrong
// (a JSON pointer), which is what a person fixing a file needs.
func decodeSession(b []byte) (*session.Session, error) { return session.Decode(b) }

// sessionEntry is one session file in the output of 'session list'.
type sessionEntry struct {
	File             string      `json:"file"`
	SessionID        string      `json:"session_id"`
	Revision         int64       `json:"revision"`
	ServiceSessionID string      `json:"service_session_id,omitempty"`
	Slots            []slotEntry `json:"slots"`
	Modified         time.Time   `json:"modified"`
}

// slotEntry is one state slot of a listed session.
type slotEntry struct {
	Key          string `json:"key"`
	Plugin       string `json:"plugin"`
	StateVersion int    `json:"state_version"`
}

// skippedFile is a *.json file that is not a session.
type skippedFile struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// sessionListing is the --json output of 'session list'.
type sessionListing struct {
	Dir      string         `json:"dir"`
	Sessions []sessionEntry `json:"sessions"`
	Skipped  []skippedFile  `json:"skipped"`
}

// maxSessionBytes bounds a file 'session list' reads and 'session import'
// accepts: far beyond any session a chat writes.
const maxSessionBytes = 256 << 20

func runSessionList(ctx context.Context, e *env, args []string) error {
	const cmd = "session list"
	fs := flagSet(e, cmd, "[DIR] [--json]",
		"Lists every *.json file in DIR (default .) that is a session: file, session id, revision,\n"+
			"the plugin of each state slot, modification time. Files that are not sessions are named\n"+
			"on one line at the end; 'wasmhist session validate FILE' says what is wrong with one.\n"+
			"With --store, lists the sessions of the store instead (FILE is then the session id).")
	asJSON := fs.Bool("json", false, "print the list as one JSON object")
	store := storeFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if store.set() {
		if len(pos) > 0 {
			return usagef(cmd, "unexpected argument %q: with --store, 'wasmhist session list --store %s' lists the store", pos[0], store.raw)
		}
		return listStore(ctx, e, cmd, store, *asJSON)
	}
	if len(pos) > 1 {
		return usagef(cmd, "want at most one DIR, got %d arguments: use 'wasmhist session list [DIR]'", len(pos))
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return failf(cmd, "reading directory %s: %w: check the path", dir, err)
	}
	l := sessionListing{Dir: dir, Sessions: []sessionEntry{}, Skipped: []skippedFile{}}
	for _, de := range ents {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		entry, reason := listEntry(filepath.Join(dir, name), de)
		if reason != "" {
			l.Skipped = append(l.Skipped, skippedFile{File: name, Reason: reason})
			continue
		}
		entry.File = name
		l.Sessions = append(l.Sessions, entry)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	printSessionList(e.stdout, l)
	return nil
}

// listStore lists the sessions of a --store.
func listStore(ctx context.Context, e *env, cmd string, store *storeFlag, asJSON bool) error {
	st, err := store.open(ctx, e, cmd)
	if err != nil {
		return err
	}
	defer st.close()
	infos, err := st.List(ctx)
	if err != nil {
		return failf(cmd, "listing %s: %w: check the store", store.describe(), err)
	}
	l := sessionListing{Dir: store.describe(), Sessions: []sessionEntry{}, Skipped: []skippedFile{}}
	for _, info := range infos {
		s, err := st.Load(ctx, info.SessionID)
		if err != nil {
			l.Skipped = append(l.Skipped, skippedFile{File: info.SessionID, Reason: oneLine(err.Error())})
			continue
		}
		entry := sessionEntry{File: info.SessionID, SessionID: s.SessionID, Revision: s.Revision, ServiceSessionID: s.ServiceSessionID, Slots: []slotEntry{}, Modified: info.Updated}
		for _, k := range slotKeys(s) {
			entry.Slots = append(entry.Slots, slotEntry{Key: k, Plugin: s.State[k].Provider, StateVersion: s.State[k].StateVersion})
		}
		l.Sessions = append(l.Sessions, entry)
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	printSessionList(e.stdout, l)
	return nil
}

// listEntry reads one *.json file, or says why it is not a session.
func listEntry(path string, de fs.DirEntry) (sessionEntry, string) {
	fi, err := de.Info()
	switch {
	case err != nil:
		return sessionEntry{}, "unreadable: " + err.Error()
	case fi.IsDir():
		return sessionEntry{}, "a directory"
	case !fi.Mode().IsRegular():
		return sessionEntry{}, "not a regular file"
	case fi.Size() > maxSessionBytes:
		return sessionEntry{}, "too large to be a session"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return sessionEntry{}, "unreadable: " + err.Error()
	}
	s, err := decodeSession(b)
	if err != nil {
		return sessionEntry{}, "not a session"
	}
	entry := sessionEntry{SessionID: s.SessionID, Revision: s.Revision, ServiceSessionID: s.ServiceSessionID, Slots: []slotEntry{}, Modified: fi.ModTime()}
	for _, k := range slotKeys(s) {
		entry.Slots = append(entry.Slots, slotEntry{Key: k, Plugin: s.State[k].Provider, StateVersion: s.State[k].StateVersion})
	}
	return entry, ""
}

func printSessionList(w io.Writer, l sessionListing) {
	if len(l.Sessions) == 0 {
		fmt.Fprintf(w, "no sessions in %s\n", l.Dir)
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "FILE\tSESSION\tREVISION\tPLUGINS\tMODIFIED")
		for _, s := range l.Sessions {
			var slots []string
			for _, sl := range s.Slots {
				slots = append(slots, sl.Key+"="+sl.Plugin)
			}
			plugins := strings.Join(slots, ",")
			if plugins == "" {
				plugins = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.File, s.SessionID, s.Revision, plugins, s.Modified.Local().Format("2006-01-02 15:04:05"))
		}
		tw.Flush()
	}
	if len(l.Skipped) > 0 {
		var names []string
		for _, s := range l.Skipped {
			names = append(names, fmt.Sprintf("%s (%s)", s.File, s.Reason))
		}
		fmt.Fprintf(w, "skipped %d: %s\n", len(l.Skipped), oneLine(strings.Join(names, ", ")))
	}
}

func runSessionShow(ctx context.Context, e *env, args []string) error {
	const cmd = "session show"
	fs := flagSet(e, cmd, "FILE [flags]",
		"Summarizes a session: its id, revision and service conversation, and for each state slot\n"+
			"its plugin, state version, state size and, when the plugin can list them, the number of\n"+
			"messages it stored. The plugin of a slot is the built-in one it names, or --plugin.")
	sf := addSlotFlags(fs)
	pluginSpec, dbPath, ps := sf.plugin, sf.db, sf.ps
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	path, s, b, f, st, err := readSessionArg(ctx, e, cmd, sf.store, pos)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.close()
	}
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
		fmt.Fprintf(w, "  %s: plugin %s, state version %d, state %d bytes, %s\n", k, st.Provider, st.StateVersion, len(st.Data), countMessages(ctx, sp, s, k))
	}
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

func runSessionExport(ctx context.Context, e *env, args []string) error {
	const cmd = "session export"
	fs := flagSet(e, cmd, "FILE",
		"Prints the session in FILE on standard output exactly as stored (compact JSON, each plugin's\n"+
			"state bytes untouched), after checking it against schemas/session.json.\n"+
			"'wasmhist session import NEW.json' writes it back: export FILE | import NEW.json copies a session.\n"+
			"With --store, the argument is a session id in the store.")
	store := storeFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	path, _, b, _, st, err := readSessionArg(ctx, e, cmd, store, pos)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.close()
	}
	if _, err := e.stdout.Write(b); err != nil {
		return failf(cmd, "writing %s to standard output: %w", path, err)
	}
	return nil
}

func runSessionImport(ctx context.Context, e *env, args []string) error {
	const cmd = "session import"
	fs := flagSet(e, cmd, "FILE [--force] < SESSION.json",
		"Reads a session from standard input, checks it against schemas/session.json, and writes it\n"+
			"to FILE as chat does (atomically, under the session directory's lock). An existing FILE is\n"+
			"refused unless --force, and even then only by a session of a newer revision. A plugin that\n"+
			"keeps history in a database keeps it in the exported session's database: chat on FILE\n"+
			"needs --db with that database. With --store, the session goes into the store under its\n"+
			"own id (no FILE).")
	force := fs.Bool("force", false, "replace an existing FILE with a session of a newer revision")
	store := storeFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if store.set() {
		if len(pos) > 0 {
			return usagef(cmd, "unexpected argument %q: with --store the session keeps its own id: use 'wasmhist session import --store %s < SESSION.json'", pos[0], store.raw)
		}
		return importIntoStore(ctx, e, cmd, store, *force)
	}
	path, err := onePath(cmd, "FILE", pos)
	if err != nil {
		return err
	}
	f, err := parseSessionFile(cmd, path)
	if err != nil {
		return err
	}
	s, err := readImport(e, cmd, path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return failf(cmd, "%s is a directory: name the session file to write", path)
	case err == nil && !*force:
		return failf(cmd, "%s exists: pass --force to replace it with this session (revision %d; the stored one must be older), or import into a new file", path, s.Revision)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return failf(cmd, "session file %s: %w: check the path and its permissions", path, err)
	}
	st, err := f.store(cmd)
	if err != nil {
		return err
	}
	if err := st.Save(ctx, s); err != nil {
		if errors.Is(err, session.ErrStaleRevision) {
			old, _, _ := readSessionFile(cmd, path)
			stored := "its"
			if old != nil {
				stored = fmt.Sprintf("its revision %d", old.Revision)
			}
			return failf(cmd, "%s holds a session at least as new as the imported revision %d (%s): keep it, or remove it first ('wasmhist session delete %s' also clears what its plugins stored, which a copy may share) and import again", path, s.Revision, stored, path)
		}
		return failf(cmd, "writing %s: %w: check that its directory is writable", path, err)
	}
	fmt.Fprintf(e.stdout, "imported session %s (revision %d, state slots: %s) into %s\n", s.SessionID, s.Revision, describeSlots(s), path)
	return nil
}

// readImport reads and checks the session on standard input.
func readImport(e *env, cmd, dest string) (*session.Session, error) {
	b, err := io.ReadAll(io.LimitReader(e.stdin, maxSessionBytes+1))
	switch {
	case err != nil:
		return nil, failf(cmd, "reading standard input: %w", err)
	case len(b) > maxSessionBytes:
		return nil, failf(cmd, "standard input is larger than %s, more than any session: pipe the output of 'wasmhist session export'", byteSize(maxSessionBytes))
	case len(bytes.TrimSpace(b)) == 0:
		return nil, usagef(cmd, "nothing on standard input: use 'wasmhist session export OLD.json | wasmhist session import %s'", dest)
	}
	s, err := decodeSession(b)
	if err != nil {
		return nil, failf(cmd, "standard input is not a valid session: %w: fix it at the place named", err)
	}
	return s, nil
}

// importIntoStore saves the session on standard input into a --store.
func importIntoStore(ctx context.Context, e *env, cmd string, store *storeFlag, force bool) error {
	s, err := readImport(e, cmd, "--store "+store.raw)
	if err != nil {
		return err
	}
	st, err := store.open(ctx, e, cmd)
	if err != nil {
		return err
	}
	defer st.close()
	where := fmt.Sprintf("session %s in %s", s.SessionID, store.describe())
	switch old, err := st.Load(ctx, s.SessionID); {
	case errors.Is(err, session.ErrNotFound):
	case err != nil:
		return failf(cmd, "reading %s: %w: check the store", where, err)
	case !force:
		return failf(cmd, "%s exists (revision %d): pass --force to replace it with this session (revision %d; the stored one must be older)", where, old.Revision, s.Revision)
	}
	if err := st.Save(ctx, s); err != nil {
		if errors.Is(err, session.ErrStaleRevision) {
			return failf(cmd, "%s is at least as new as the imported revision %d: keep it, or delete it first ('wasmhist session delete --store %s %s') and import again", where, s.Revision, store.raw, s.SessionID)
		}
		return failf(cmd, "writing %s: %w: check the store", where, err)
	}
	fmt.Fprintf(e.stdout, "imported session %s (revision %d, state slots: %s) into %s\n", s.SessionID, s.Revision, describeSlots(s), store.describe())
	return nil
}

func runSessionDelete(ctx context.Context, e *env, args []string) error {
	const cmd = "session delete"
	fs := flagSet(e, cmd, "FILE [flags]",
		"Deletes a session: each slot's plugin clears what it stored for the session (rows in a\n"+
			"database must not outlive it), then FILE is removed. A slot whose plugin is not found, has\n"+
			"no clear export, or whose database does not exist is refused unless --force, which removes\n"+
			"the file and leaves what that plugin stored. The database file itself is kept: other\n"+
			"sessions may use it.")
	sf := addSlotFlags(fs)
	pluginSpec, dbPath, ps := sf.plugin, sf.db, sf.ps
	force := fs.Bool("force", false, "remove the file even when a plugin cannot clear what it stored")
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	path, s, _, f, st, err := readSessionArg(ctx, e, cmd, sf.store, pos)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.close()
	} else if err := checkSessionFile(cmd, &f); err != nil {
		return err
	}
	var toClear []string // the keys to clear
	var remain []string
	if len(s.State) > 0 {
		sp, err := loadSlotPlugins(ctx, e, cmd, f, s, *pluginSpec, *dbPath, ps)
		if err != nil {
			return err
		}
		defer sp.close(ctx)
		// Every slot is checked before any is cleared, so that a refusal
		// changes nothing.
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
		if len(remain) > 0 && !*force {
			return failf(cmd, "%s: %s: pass --force to remove the file anyway", path, strings.Join(remain, "; "))
		}
		// A plugin may export clear and still answer that it does not
		// implement it; that is known only by calling it. The clears run
		// in one transaction per database, which also deletes the
		// session's journal row there: the agent would otherwise restore
		// the deleted session into a new one of the same id.
		tx := txn.New()
		defer tx.Rollback(ctx)
		tctx := txn.With(ctx, tx)
		var cleared []string
		for _, k := range toClear {
			p, _ := sp.plugin(s, k)
			err := p.Clear(tctx, s, k)
			switch {
			case errors.Is(err, host.ErrUnsupported):
				r := fmt.Sprintf("slot %q: plugin %s does not implement clear, so whatever it stored outside the session would remain", k, p.Info().Name)
				if !*force {
					// The clears so far roll back with tx: nothing changed.
					return failf(cmd, "%s: %s: nothing was cleared; pass --force to remove the file anyway", path, r)
				}
				remain = append(remain, r)
			case err != nil:
				return failf(cmd, "clearing slot %q of %s through plugin %s: %w: the file was kept; check the session with 'wasmhist session validate %s'", k, path, describePlugin(p), err, path)
			default:
				cleared = append(cleared, k)
			}
		}
		toClear = cleared
		for _, target := range tx.Targets() {
			if err := tx.Delete(ctx, target, txn.Journal, s.SessionID); err != nil {
				return failf(cmd, "clearing %s: %w: nothing was cleared; check the database", path, err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return failf(cmd, "clearing %s: %w: nothing was cleared; check the database", path, err)
		}
	}
	if st != nil {
		// The store refuses the delete if a chat committed meanwhile.
		if err := st.Delete(ctx, s.SessionID, s.Revision); err != nil {
			if errors.Is(err, session.ErrStaleRevision) {
				return failf(cmd, "%s changed while it was being deleted (it was at revision %d): run the command again when no chat is using it", path, s.Revision)
			}
			return failf(cmd, "deleting %s: %w: its plugins' stored history was cleared; check the store", path, err)
		}
		printDeleted(e.stdout, path, s, toClear, remain)
		return nil
	}
	// A chat that committed meanwhile has stored more than was cleared.
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
	printDeleted(e.stdout, path, s, toClear, remain)
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
