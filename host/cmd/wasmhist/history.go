package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
)

// historyPage is how many messages one list call asks for by default.
const historyPage = 100

// historyReport is the --json output of history.
type historyReport struct {
	SessionFile string        `json:"session_file,omitempty"`
	Store       string        `json:"store,omitempty"`
	SessionID   string        `json:"session_id"`
	Revision    int64         `json:"revision"`
	Plugin      string        `json:"plugin"`
	Version     string        `json:"plugin_version"`
	SHA256      string        `json:"sha256"`
	StateKey    string        `json:"state_key"`
	Database    string        `json:"database,omitempty"`
	Messages    []abi.Message `json:"messages"`
}

func runHistory(ctx context.Context, e *env, args []string) error {
	const cmd = "history"
	fs := flagSet(e, cmd, "--session FILE [--json]",
		"Prints the history a session's plugin stored, read page by page through the plugin's\n"+
			"list export. The plugin is the one that wrote the session, unless --plugin says otherwise.")
	sessionPath := fs.String("session", "", "session `FILE` to read, or with --store the session's id (required)")
	store := storeFlags(fs)
	pluginSpec := fs.String("plugin", "", "plugin: inmemory, sqlite or `PATH.wasm` (default: the one that wrote the session)")
	dbPath := fs.String("db", "", "the plugin's SQLite database `PATH` (default: the session file with .db)")
	key := fs.String("state-key", stateKey, "the session state `key` to read")
	asJSON := fs.Bool("json", false, "print the history as one JSON object")
	pageSize := fs.Int("page-size", historyPage, "messages to ask the plugin for per list call (`n`)")
	ps := pluginFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(cmd, "unexpected argument %q: use 'wasmhist history --session FILE'", pos[0])
	}
	if *sessionPath == "" {
		return usagef(cmd, "no session given: use 'wasmhist history --session FILE'")
	}
	if *pageSize < 1 {
		return usagef(cmd, "--page-size %d: pass a positive number", *pageSize)
	}
	var s *session.Session
	var where, db string
	if store.set() {
		st, err := store.open(ctx, e, cmd)
		if err != nil {
			return err
		}
		defer st.close()
		if s, err = st.Load(ctx, *sessionPath); err != nil {
			return failf(cmd, "loading session %s from %s: %w: check --session (the session's id; 'wasmhist session list --store %s' lists them)", *sessionPath, store.describe(), err, store.raw)
		}
		where, db = "session "+s.SessionID+" in "+store.describe(), store.defaultDB(s.SessionID)
	} else {
		f, err := parseSessionFile(cmd, *sessionPath)
		if err != nil {
			return err
		}
		if s, err = f.load(cmd); err != nil {
			return err
		}
		where, db = "session file "+f.path, f.dbPath()
	}
	slot, hasSlot := s.State[*key]
	spec := *pluginSpec
	if spec == "" {
		if !hasSlot {
			return failf(cmd, "%s has no state under key %q, so nothing names its plugin: pass --plugin, or check --state-key", where, *key)
		}
		if spec, err = pluginOfSession(cmd, *sessionPath, slot.Provider); err != nil {
			return err
		}
	}
	path, err := resolvePlugin(e, cmd, spec)
	if err != nil {
		return err
	}
	if *dbPath != "" {
		db = *dbPath
	}
	if db == "" {
		db = filepath.Join(os.TempDir(), "wasmhist-no-database-given.db")
	}
	grants, err := dbGrants(cmd, db)
	if err != nil {
		return err
	}
	h, err := newHost(ctx, e, cmd, ps)
	if err != nil {
		return err
	}
	defer h.Close(context.WithoutCancel(ctx))
	p, err := loadPlugin(ctx, e, h, cmd, path, grants, ps)
	if err != nil {
		return err
	}
	if hasSlot && slot.Provider != p.Info().Name {
		return usagef(cmd, "%s keeps key %q with plugin %q, not %q: pass --plugin %s", where, *key, slot.Provider, p.Info().Name, slot.Provider)
	}

	if wantsSQL(p) && *dbPath == "" && store.set() && store.defaultDB(s.SessionID) == "" {
		return usagef(cmd, "plugin %s keeps history in a database: with --store %s pass --db PATH, the database the session was chatted with", p.Info().Name, store.raw)
	}
	r := historyReport{
		SessionFile: *sessionPath, SessionID: s.SessionID, Revision: s.Revision,
		Plugin: p.Info().Name, Version: p.Info().Version, SHA256: p.SHA256(), StateKey: *key,
		Messages: []abi.Message{},
	}
	if store.set() {
		r.SessionFile, r.Store = "", store.describe()
	}
	if wantsSQL(p) {
		r.Database = db
	}
	if hasSlot {
		cursor := ""
		for {
			page, next, err := p.List(ctx, s, *key, cursor, *pageSize)
			if errors.Is(err, host.ErrUnsupported) {
				return failf(cmd, "plugin %s has no list export, so its history cannot be read from outside an agent run: use a plugin that implements sdk.Lister", p.Info().Name)
			}
			if err != nil {
				return failf(cmd, "listing the history of %s through plugin %s: %w: check the session with 'wasmhist session validate'", where, p.Info().Name, err)
			}
			r.Messages = append(r.Messages, page...)
			if next == "" {
				break
			}
			if next == cursor {
				return failf(cmd, "plugin %s returned the same list cursor %q twice: the plugin's list export is broken", p.Info().Name, next)
			}
			cursor = next
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printHistory(e.stdout, r)
	return nil
}

func printHistory(w io.Writer, r historyReport) {
	place := r.SessionFile
	if r.Store != "" {
		place = r.Store
	}
	fmt.Fprintf(w, "session %s (%s, revision %d)\n", r.SessionID, place, r.Revision)
	where := fmt.Sprintf("plugin %s %s (sha256 %s), state key %q", r.Plugin, r.Version, shortSum(r.SHA256), r.StateKey)
	if r.Database != "" {
		where += ", database " + r.Database
	}
	fmt.Fprintf(w, "%s\n\n", where)
	for i, m := range r.Messages {
		fmt.Fprintf(w, "%3d  %-9s  %s\n", i+1, m.Role, messageLine(m))
	}
	if len(r.Messages) == 0 {
		fmt.Fprintln(w, "(no messages stored)")
		return
	}
	fmt.Fprintf(w, "\n%d messages\n", len(r.Messages))
}

// messageLine renders a message's parts on one line.
func messageLine(m abi.Message) string {
	var parts []string
	for _, c := range m.Contents {
		switch c.Type {
		case abi.ContentText:
			parts = append(parts, c.Text)
		case abi.ContentFunctionCall:
			parts = append(parts, fmt.Sprintf("[call %s %s]", c.Name, compactJSON(c.Arguments)))
		case abi.ContentFunctionResult:
			if c.Error != "" {
				parts = append(parts, fmt.Sprintf("[result %s: error: %s]", c.CallID, c.Error))
			} else {
				parts = append(parts, fmt.Sprintf("[result %s: %s]", c.CallID, compactJSON(c.Result)))
			}
		case abi.ContentUsage:
			// Usage is bookkeeping, not conversation.
		default:
			parts = append(parts, "["+string(c.Type)+"]")
		}
	}
	return oneLine(strings.Join(parts, " "))
}
