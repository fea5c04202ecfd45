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
	"github.com/wasmhist/wasmhist/host/conversation"
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
	// Compaction is the summary runs send in place of the oldest
	// messages, which are all listed in Messages (chat --compact-at).
	Compaction *session.Compaction `json:"compaction,omitempty"`
}

func runHistory(ctx context.Context, e *env, args []string) error {
	const cmd = "history"
	fs := flagSet(e, cmd, helpText{
		usage:   "--session FILE|ID [--store STORE] [--json] [flags]",
		summary: "Prints the history a session's plugin stored, read page by page through its list export.",
		examples: []string{
			"wasmhist history --session trip.json",
			"wasmhist history --store sessions.db --session trip-2 --json",
		},
		details: "  The plugin is the one that wrote the session unless --plugin says otherwise, the\n" +
			"  database the one the session records unless --db does. On a terminal, a long read\n" +
			"  shows its progress on standard error.",
	})
	sessionPath := fs.String("session", "", "session `FILE` to read, or with --store its ID (required)")
	store := storeFlags(fs)
	pluginSpec := fs.String("plugin", "", "plugin: inmemory, sqlite or `PATH.wasm` (default: the session's)")
	dbPath := fs.String("db", "", "the plugin's database: SQLite `PATH`, postgres or env:VAR (default FILE.db)")
	key := fs.String("state-key", stateKey, "the session state `KEY` to read")
	asJSON := fs.Bool("json", false, "print the history as one JSON object")
	pageSize := fs.Int("page-size", historyPage, "messages to ask the plugin for per list call (`N`)")
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
	a := sessionFlagArg(cmd, store, *sessionPath)
	defer a.close()
	s, err := a.load(ctx, e)
	if err != nil {
		return err
	}
	h, p, db, err := openHistoryPlugin(ctx, e, a, s, *key, *pluginSpec, *dbPath, ps)
	if err != nil {
		return err
	}
	defer h.Close(context.WithoutCancel(ctx))
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
	if _, hasSlot := s.State[*key]; hasSlot {
		if err := dbExists(p, db); err != nil {
			return failf(cmd, "%w", err)
		}
		warnBehind(ctx, e, cmd, conversation.CheckHeld(ctx, s, map[string]*host.Plugin{*key: p}), "what follows is the history the database holds")
		if r.Messages, err = listHistory(ctx, newProgress(e, cmd, false), cmd, a.where(s.SessionID), p, s, *key, *pageSize); err != nil {
			return err
		}
	}
	if c, ok := s.Compactions[*key]; ok {
		r.Compaction = &c
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printHistory(e.stdout, r)
	return nil
}

// openHistoryPlugin loads the plugin that reads the slot at key of s: the
// one the slot names unless --plugin (pluginSpec) says otherwise, granted
// the session's database (--db, else its default). It returns the host
// (which the caller closes), the plugin and the database.
func openHistoryPlugin(ctx context.Context, e *env, a *sessionArg, s *session.Session, key, pluginSpec, dbPath string, ps *pluginSettings) (_ *host.Host, _ *host.Plugin, db string, err error) {
	cmd, where := a.cmd, a.where(s.SessionID)
	slot, hasSlot := s.State[key]
	spec := pluginSpec
	if spec == "" {
		if !hasSlot {
			return nil, nil, "", failf(cmd, "%s has no state under key %q, so nothing names its plugin: pass --plugin, or check --state-key", where, key)
		}
		if spec, err = pluginOfSession(cmd, a.name, slot.Provider); err != nil {
			return nil, nil, "", err
		}
	}
	path, err := resolvePlugin(e, cmd, spec)
	if err != nil {
		return nil, nil, "", err
	}
	if f, err := a.file(); err == nil {
		db = f.historyDB(e, s)
	}
	if dbPath != "" {
		db = dbPath
	}
	found := db != ""
	if !found {
		db = filepath.Join(os.TempDir(), "wasmhist-no-database-given.db")
	}
	grants, err := dbGrantsFor(e, cmd, db)
	if err != nil {
		return nil, nil, "", err
	}
	h, err := newHost(ctx, e, cmd, ps)
	if err != nil {
		return nil, nil, "", err
	}
	defer func() {
		if err != nil {
			h.Close(context.WithoutCancel(ctx))
		}
	}()
	p, err := loadPlugin(ctx, e, h, cmd, path, grants, ps)
	if err != nil {
		return nil, nil, "", err
	}
	if hasSlot && slot.Provider != p.Info().Name {
		return nil, nil, "", usagef(cmd, "%s keeps key %q with plugin %q, not %q: pass --plugin %s", where, key, slot.Provider, p.Info().Name, slot.Provider)
	}
	if wantsSQL(p) && !found {
		none := "none was given"
		if a.inStore() {
			none = "--store " + a.store.raw + " names none"
		}
		return nil, nil, "", usagef(cmd, "plugin %s keeps history in a database, and %s: %s", p.Info().Name, none, needDB(s))
	}
	return h, p, db, nil
}

// listHistory reads every message the plugin stored for the slot at key
// of s, pageSize at a time; where names the session in messages. A
// history of more than one page shows how much was read on pr.
func listHistory(ctx context.Context, pr *progress, cmd, where string, p *host.Plugin, s *session.Session, key string, pageSize int) ([]abi.Message, error) {
	defer pr.done()
	msgs := []abi.Message{}
	for page, err := range p.Pages(ctx, s, key, pageSize) {
		if errors.Is(err, host.ErrUnsupported) {
			return nil, failf(cmd, "plugin %s has no list export, so its history cannot be read from outside an agent run: use a plugin that implements sdk.Lister", p.Info().Name)
		}
		if interrupted(ctx, err) {
			return nil, failf(cmd, "%w while the history of %s was listed: nothing was changed", errInterrupted, where)
		}
		if err != nil {
			return nil, failf(cmd, "listing the history of %s through plugin %s: %w: check the session with 'wasmhist session validate'", where, p.Info().Name, err)
		}
		if len(msgs) > 0 {
			pr.show("%d messages of %s read", len(msgs), where)
		}
		msgs = append(msgs, page...)
	}
	return msgs, nil
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
	if c := r.Compaction; c != nil {
		fmt.Fprintf(w, "summary sent in place of the first %d (all still stored): %s\n", c.Covers, oneLine(c.Summary))
	}
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
