package main

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
)

// stateKey is the session slot the command's history provider uses.
const stateKey = "history"

// chatSetup is everything a chat turn needs, shared by the one-shot and
// the interactive forms.
type chatSetup struct {
	host     *host.Host
	agent    *agent.Agent
	copyOnly bool // the service keeps the conversation; the plugin a copy
	plugin   *host.Plugin
	session  *session.Session
	file     *sessionFile // the --session FILE, without --store
	store    *storeFlag   // --store, when given
	closer   func()       // closes the store
	// dbOrigin names the database path and where it came from, for
	// messages: --db PATH, or the configuration file's key.
	dbOrigin string
	// reload reads the session as last committed, by any process; nil
	// when the session lives only in this process.
	reload func(context.Context) (*session.Session, error)
	// acceptNewBuild: --accept-new-build (agent.RunOptions.AcceptNewBuild).
	acceptNewBuild bool
	db             string      // the plugin's database, when it uses sql
	limits         host.Limits // what the plugin's calls run under

	everyStatus bool    // --status: the status lines after every answer
	shown       *status // the status lines last printed

	askBefore askBeforeFlag // --ask-before: tools a person approves first
	compactAt int           // --compact-at: the history's token budget
}

func runChat(ctx context.Context, e *env, args []string) error {
	const cmd = "chat"
	fs := flagSet(e, cmd, helpText{
		usage: "[-m MESSAGE] [--plugin P] [--session FILE|ID] [flags]",
		summary: "Talks to an agent whose history a plugin keeps. With -m it answers one message, otherwise\n" +
			"one per line of standard input. The session is created when missing and resumed otherwise.\n" +
			"The offline model needs no network or key; the openai models read OPENAI_API_KEY.",
		examples: []string{
			`wasmhist chat --plugin sqlite --session trip.json -m "I like Rome"`,
			`wasmhist chat --session trip.json -m "Which city do I like?"`,
			`wasmhist chat --store sessions.db --session trip-2 -m "I like Florence"`,
			`wasmhist chat --model openai-chat --base-url http://localhost:11434/v1 -m "Hello"`,
		},
		details: chatDetails,
	})
	var message messageFlag
	fs.Var(&message, "m", "answer this `MESSAGE` and exit")
	pluginSpec := fs.String("plugin", "", "history plugin: inmemory, sqlite or `PATH.wasm` (default: the session's)")
	sessionPath := fs.String("session", "", "session `FILE`, or with --store its ID; created when missing")
	store := storeFlags(fs)
	acceptNewBuild := fs.Bool("accept-new-build", false, "resume a session another build of its plugin wrote")
	dbPath := fs.String("db", "", "database for a sql plugin: SQLite `PATH`, postgres or env:VAR (default FILE.db)")
	perCall := fs.Bool("per-service-call", false, "persist after every model call instead of once per run")
	everyStatus := fs.Bool("status", false, "print where the history and the session are after every answer")
	askBefore := askBeforeFlag{}
	compactAt := fs.Int("compact-at", 0, "summarise the oldest turns once the history passes `TOKENS`; all stay stored")
	fs.Var(askBefore, "ask-before", "ask y/n before each call of these `TOOLS` (comma-separated), across runs")
	mc := modelFlags(fs)
	ps := pluginFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(cmd, "unexpected argument %q: pass the message with -m \"...\"", pos[0])
	}
	if *compactAt < 0 {
		return usagef(cmd, "--compact-at %d: pass a positive number of tokens, or 0 for no compaction", *compactAt)
	}

	restoreGC := lessGCWhileLoading()
	c, err := setupChat(ctx, e, cmd, mc, ps, store, *pluginSpec, *sessionPath, *dbPath, fs.originValue("db"), *perCall, askBefore, *compactAt)
	if message.set {
		// One turn, and the process ends: the collector stays off through
		// it, bounded as while loading; turned back on here, it would
		// collect at once what the load left.
		defer restoreGC()
	} else {
		restoreGC()
	}
	if err != nil {
		return err
	}
	defer c.closer()
	defer c.host.Close(context.WithoutCancel(ctx))
	c.acceptNewBuild = *acceptNewBuild

	c.everyStatus = *everyStatus

	if message.set {
		return c.oneTurn(ctx, e, cmd, message.text)
	}
	return c.readLoop(ctx, e, cmd)
}

// maxLineBytes bounds one line of standard input: the default limit of a
// plugin's input, which a longer message could not be stored under anyway.
const maxLineBytes = 8 << 20

// messageFlag is -m: given at most once, never blank. flag alone would
// let a second -m replace the first and an empty one fall through to
// reading standard input.
type messageFlag struct {
	text string
	set  bool
}

func (m *messageFlag) String() string { return m.text }

func (m *messageFlag) Set(v string) error {
	if m.set {
		return errors.New("-m given twice: send one message per run, or one per line on standard input")
	}
	if strings.TrimSpace(v) == "" {
		return errors.New("-m needs a message that is not blank")
	}
	m.text, m.set = v, true
	return nil
}

// oneTurn answers -m. Ctrl-C cancels the turn and ends the command.
func (c *chatSetup) oneTurn(ctx context.Context, e *env, cmd, text string) error {
	tctx, stop := cancelOnInterrupt(ctx, e)
	defer stop()
	// Standard input is read only for a question (y/n).
	var src lineSource
	source := func() lineSource {
		if src == nil {
			src = chatLines(e)
		}
		return src
	}
	defer func() {
		if src != nil {
			src.close()
		}
	}()
	// A question an earlier chat left is answered before the message,
	// which the agent would refuse until then.
	if ok, err := c.settleApprovals(tctx, e, cmd, source); !ok || err != nil {
		return err
	}
	if err := c.turn(tctx, e, cmd, text); err != nil {
		return err
	}
	_, err := c.settleApprovals(tctx, e, cmd, source)
	return err
}

// readLoop answers standard input line by line. At the prompt (or while
// waiting for piped input) Ctrl-C ends the chat; during a turn it cancels
// the turn, and at a terminal the prompt comes back. At a terminal a
// failed turn is reported and the prompt comes back too, as psql does;
// the chat then ends with a failure if its last turn failed. Piped input
// stops at the first failed turn, so a script sees where it stopped.
func (c *chatSetup) readLoop(ctx context.Context, e *env, cmd string) error {
	prompt := isTerminal(e.stdin)
	src := chatLines(e)
	defer src.close()
	var failed error // the last turn's failure, at a terminal
	source := func() lineSource { return src }
	if ok, err := c.settleApprovals(ctx, e, cmd, source); err != nil || !ok {
		return err
	}
	for n := 1; ; n++ {
		var l line
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.interrupts:
			if prompt {
				fmt.Fprintln(e.stdout)
			}
			return failf(cmd, "%w at the prompt: %s", errInterrupted, c.savedAt())
		case l = <-src.next():
		}
		switch {
		case l.interrupted:
			fmt.Fprintln(e.stdout)
			return failf(cmd, "%w at the prompt: %s", errInterrupted, c.savedAt())
		case l.eof:
			if prompt {
				fmt.Fprintln(e.stdout)
			}
			return c.lastTurn(cmd, failed)
		case errors.Is(l.err, bufio.ErrTooLong):
			return failf(cmd, "line %d of standard input is longer than %d MiB: send a shorter message", n, maxLineBytes>>20)
		case l.err != nil:
			return failf(cmd, "reading standard input: %w", l.err)
		}
		text := strings.TrimSpace(l.text)
		switch text {
		case "":
			// Blank lines separate paragraphs a user pastes; they are not
			// messages (-m refuses a blank one for the same reason).
			continue
		case "/quit", "/exit":
			return c.lastTurn(cmd, failed)
		}
		tctx, stop := cancelOnInterrupt(ctx, e)
		err := c.turn(tctx, e, cmd, text)
		if err == nil {
			var asked bool
			if asked, err = c.settleApprovals(tctx, e, cmd, source); err == nil && !asked {
				stop()
				return nil
			}
		}
		took := stop()
		switch {
		case err == nil && took:
			// Ctrl-C came as the turn ended: the user is at the prompt.
			return failf(cmd, "%w at the prompt: %s", errInterrupted, c.savedAt())
		case err == nil:
			failed = nil
		case interrupted(tctx, err) && prompt:
			failed = nil
			fmt.Fprintf(e.stderr, "wasmhist %s: interrupted: the turn was cancelled; %s\n", cmd, c.savedAt())
		case prompt:
			failed = err
			fmt.Fprintln(e.stderr, oneLine(err.Error()))
		default:
			return err
		}
	}
}

// errLastTurnFailed ends an interactive chat whose last turn failed, so
// that the exit status says so.
var errLastTurnFailed = errors.New("the last message failed")

// lastTurn is how an interactive chat ends: nil, or a failure when its
// last turn failed (reported when it did).
func (c *chatSetup) lastTurn(cmd string, failed error) error {
	if failed == nil {
		return nil
	}
	return failf(cmd, "%w (reported above): %s; send it again in a new chat", errLastTurnFailed, c.savedAt())
}

// savedAt says where the session stands, for a message about a turn that
// did not finish.
func (c *chatSetup) savedAt() string {
	if c.store != nil {
		return fmt.Sprintf("session %s in %s is at revision %d", c.session.SessionID, c.store.describe(), c.session.Revision)
	}
	if c.file == nil {
		return "the session was not being saved"
	}
	// Per-run persistence stores nothing of a failed turn; per-service-call
	// keeps its calls that completed. The revision says which is there.
	return fmt.Sprintf("session file %s is at revision %d", c.file.path, c.session.Revision)
}

// setupChat wires a chat from its flags, in the order a problem is best
// found: the session, the plugin, the model client, the host and the
// plugin loaded into it, the storage the turns will write, the agent.
func setupChat(ctx context.Context, e *env, cmd string, mc *modelConfig, ps *pluginSettings, store *storeFlag, pluginSpec, sessionPath, dbPath, dbOrigin string, perCall bool, askBefore askBeforeFlag, compactAt int) (_ *chatSetup, err error) {
	c := &chatSetup{session: session.New(), db: dbPath, dbOrigin: dbOrigin, closer: func() {}, askBefore: askBefore, compactAt: compactAt}
	if c.limits, err = ps.limits(cmd); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.closer()
		}
	}()
	saver, err := c.openSession(ctx, e, cmd, store, sessionPath)
	if err != nil {
		return nil, err
	}
	if pluginSpec == "" {
		pluginSpec = "inmemory"
		if slot, ok := c.session.State[stateKey]; ok {
			if pluginSpec, err = pluginOfSession(cmd, sessionPath, slot.Provider); err != nil {
				return nil, err
			}
		}
	}
	path, err := resolvePlugin(e, cmd, pluginSpec)
	if err != nil {
		return nil, err
	}
	client, err := mc.client(e, cmd)
	if err != nil {
		return nil, err
	}
	if c.host, err = newHost(ctx, e, cmd, ps); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.host.Close(context.WithoutCancel(ctx))
		}
	}()
	if err = c.loadPlugin(ctx, e, cmd, path, sessionPath, ps); err != nil {
		return nil, err
	}
	if err = c.checkStorage(cmd, dbPath); err != nil {
		return nil, err
	}
	if err = c.newAgent(cmd, e, client, mc, saver, perCall); err != nil {
		return nil, err
	}
	return c, nil
}

// openSession loads the session --session names (created when missing),
// or with --store the one of that id, and returns what saves it; nil
// when the session lives only in this process. It sets c.closer to close
// the store.
func (c *chatSetup) openSession(ctx context.Context, e *env, cmd string, store *storeFlag, sessionPath string) (store.Saver, error) {
	if !store.set() && sessionPath == "" {
		return nil, nil
	}
	a := sessionFlagArg(cmd, store, sessionPath)
	c.closer = a.close
	s, _, err := a.loadOrNew(ctx, e)
	if err != nil {
		return nil, err
	}
	c.session = s
	if c.db == "" {
		c.db = a.defaultDB(s.SessionID)
		if f, err := a.file(); err == nil && (c.db == "" || recordedPostgresName(s) != "") {
			// A history in PostgreSQL has no place beside the session, nor
			// a PostgreSQL store a default: the database the read commands
			// take, an SQLite one only when it is there ("" otherwise:
			// checkStorage says which --db to pass).
			c.db = f.historyDB(e, s)
			if _, pg := pgDBEnv(c.db); !pg && !isFile(c.db) {
				c.db = ""
			}
		}
	}
	if a.inStore() {
		st, id := a.st, s.SessionID
		c.store = store
		c.reload = func(ctx context.Context) (*session.Session, error) { return st.Load(ctx, id) }
		return st, nil
	}
	f, err := a.file()
	if err != nil {
		return nil, err
	}
	c.file = &f
	st, err := f.store(cmd)
	if err != nil {
		return nil, err
	}
	c.reload = func(ctx context.Context) (*session.Session, error) { return st.Load(ctx) }
	return st, nil
}

// loadPlugin loads the history plugin at path into c.host, granted c.db
// when there is one, and checks that it is the plugin of the session's
// history slot.
func (c *chatSetup) loadPlugin(ctx context.Context, e *env, cmd, path, sessionPath string, ps *pluginSettings) (err error) {
	// Without a database the grant is still made, one that refuses use,
	// so the plugin loads and checkStorage can say what to pass.
	grants := []host.Grant{sqlgrant.New(sqlgrant.Config{PathFunc: func(context.Context) (string, error) {
		return "", errors.New("no database given")
	}})}
	if c.db != "" {
		if grants, err = dbGrantsFor(e, cmd, c.db); err != nil {
			return err
		}
	}
	if c.plugin, err = loadPlugin(ctx, e, c.host, cmd, path, grants, ps); err != nil {
		return err
	}
	return checkSlot(cmd, c.session, c.plugin, sessionPath)
}

// checkStorage checks, before the first model call, that what the turns
// will write can be written: the plugin's database when it wants one (and
// only then: dbPath is --db), and the session file.
func (c *chatSetup) checkStorage(cmd, dbPath string) error {
	name := c.plugin.Info().Name
	switch {
	case wantsSQL(c.plugin) && c.db == "" && c.store != nil:
		return usagef(cmd, "plugin %s keeps history in a database, and --store %s names none: %s", name, c.store.raw, needDB(c.session))
	case wantsSQL(c.plugin) && c.db == "" && c.session != nil && recordedPostgresName(c.session) != "":
		return usagef(cmd, "plugin %s keeps history in a database, and none was given: %s", name, needDB(c.session))
	case wantsSQL(c.plugin) && c.db == "":
		return usagef(cmd, "plugin %s keeps history in a database: pass --session FILE (the database goes beside it) or --db PATH", name)
	case !wantsSQL(c.plugin) && dbPath != "":
		return usagef(cmd, "%s: plugin %s keeps no history in a database, so it would not be used: drop it, or pass --plugin sqlite", c.dbOrigin, name)
	case !wantsSQL(c.plugin):
		c.db = ""
	}
	if _, pg := pgDBEnv(c.db); c.db != "" && !pg {
		if err := checkDatabase(cmd, c.db); err != nil {
			return err
		}
	}
	if c.file != nil {
		return checkSessionFile(cmd, c.file)
	}
	return nil
}

// newAgent configures the agent of the chat.
func (c *chatSetup) newAgent(cmd string, e *env, client model.Client, mc *modelConfig, saver store.Saver, perCall bool) error {
	cfg := agent.Config{
		Model:        client,
		Instructions: "You are a helpful assistant. Use the tools when they help.",
		Tools:        c.chatTools(),
		// A service that keeps the conversation (Responses) is sent only
		// new messages; the plugin then keeps a store-only copy, which is
		// what 'history' reads, and loading it too would be a conflict.
		Providers:                        []agent.ProviderConfig{{Provider: c.plugin.Provider(stateKey), SkipLoad: mc.storesHistory()}},
		RequirePerServiceCallPersistence: perCall,
		Saver:                            saver,
		Logger:                           warnLogger(e.stderr, cmd),
		Compaction:                       agent.Compaction{MaxTokens: c.compactAt},
	}
	c.copyOnly = mc.storesHistory()
	var err error
	if c.agent, err = agent.New(cfg); err != nil {
		return failf(cmd, "configuring the agent: %w", err)
	}
	return nil
}

// checkSlot refuses, with advice, a session whose history slot another
// plugin wrote: the host would refuse it too, but later and less helpfully.
func checkSlot(cmd string, s *session.Session, p *host.Plugin, sessionPath string) error {
	slot, ok := s.State[stateKey]
	if !ok || slot.Provider == p.Info().Name {
		return nil
	}
	return usagef(cmd, "session %s keeps its history with plugin %q, not %q: pass --plugin %s (or the path of that plugin), or start a new session file",
		sessionPath, slot.Provider, p.Info().Name, slot.Provider)
}

// turn runs one message through the agent and prints the tool activity,
// the reply and where the history went.
func (c *chatSetup) turn(ctx context.Context, e *env, cmd, text string) error {
	return c.respond(ctx, e, cmd, []abi.Message{abi.NewMessage(abi.RoleUser, text)}, nil)
}

// respond runs input (none for a run that only carries decisions) and
// prints what the run did, as turn says.
func (c *chatSetup) respond(ctx context.Context, e *env, cmd string, input []abi.Message, decisions []agent.Decision) error {
	compacted := c.session.Compactions[stateKey]
	res, err := c.run(ctx, e, cmd, input, decisions)
	if interrupted(ctx, err) {
		return failf(cmd, "%w: the turn was cancelled; %s", errInterrupted, c.savedAt())
	}
	var mismatch *agent.ProviderMismatchError
	if errors.As(err, &mismatch) {
		return &quietError{msg: "wasmhist " + cmd + ": " + c.mismatchMessage(mismatch), err: err}
	}
	if err != nil {
		return failf(cmd, "running the agent: %w (%s): %s", err, c.savedAt(), runAdvice(err, c.limits))
	}
	for _, rc := range res.Resumed {
		fmt.Fprintf(e.stdout, "resumed: %s\n", rc)
	}
	if now, ok := c.session.Compactions[stateKey]; ok && now != compacted {
		fmt.Fprintf(e.stdout, "history: the first %d messages were summarised for the model; all are still stored\n", now.Covers)
	}
	printToolActivity(e.stdout, res.Messages)
	reply := res.Text()
	switch {
	case reply == "" && len(res.ApprovalRequests) > 0:
		// The run waits for the person: asked next (chat_approval.go).
	case reply == "":
		fmt.Fprintf(e.stdout, "assistant: (no text)\n")
	default:
		fmt.Fprintf(e.stdout, "assistant: %s\n", reply)
	}

	where := fmt.Sprintf("plugin %s, state key %q", describePlugin(c.plugin), stateKey)
	if c.db != "" {
		where += ", database " + c.db
	}
	if c.copyOnly {
		where += " (a copy: the model service keeps the conversation)"
	}
	// The status lines say where things are; after the first turn they
	// are printed again only when that changed (a revision alone does
	// not count), or every turn with --status.
	st := status{history: where, service: c.session.ServiceSessionID}
	switch {
	case c.store != nil:
		st.session = fmt.Sprintf("%s in %s, revision %d", c.session.SessionID, c.store.describe(), c.session.Revision)
	case c.file != nil:
		st.session = c.file.describe(c.session)
	default:
		st.session = fmt.Sprintf("%s, revision %d, not saved (pass --session FILE to keep it)", c.session.SessionID, c.session.Revision)
	}
	if c.everyStatus || c.shown == nil || c.shown.history != st.history {
		fmt.Fprintf(e.stdout, "history: %s\n", st.history)
	}
	if c.everyStatus || c.shown == nil || c.shown.service != st.service {
		fmt.Fprintf(e.stdout, "session: %s\n", st.session)
		if st.service != "" {
			fmt.Fprintf(e.stdout, "service conversation: %s\n", st.service)
		}
	}
	c.shown = &st
	return nil
}

// quietError is a failure whose message the command words itself, in
// place of its cause's (which explains the same thing to a Go caller, in
// the API's terms); the cause stays inspectable.
type quietError struct {
	msg string
	err error
}

func (q *quietError) Error() string { return q.msg }
func (q *quietError) Unwrap() error { return q.err }

// mismatchMessage says, in one line and once, that the session's history
// slot was written by another plugin, build or storage, and which flag
// continues it: a plugin author meets the build case on every rebuild.
func (c *chatSetup) mismatchMessage(m *agent.ProviderMismatchError) string {
	name := c.sessionName()
	switch m.Field {
	case "storage":
		return fmt.Sprintf("%s keeps its history in %s, not %s: pass --db (or --store) naming that database, or copy that database there first (--accept-new-build does not change storage)", name, orNone(m.Recorded.Storage), orNone(m.Current.Storage))
	case "database":
		if m.Held == 0 {
			advice := "pass --db naming the database it was chatted with, or a copy of it"
			if n := storageOf(m.Recorded.Storage, "postgres:"); n != "" {
				advice = "pass --db postgres (or --db env:VAR) with a connection string that reaches PostgreSQL database " + n
			}
			return fmt.Sprintf("%s: %s holds none of its history (recorded in %s at revision %d): %s", name, orNone(m.Current.Storage), orNone(m.Recorded.Storage), m.Recorded.Revision, advice)
		}
		return fmt.Sprintf("%s: %s holds its history at revision %d, the session is at %d: restore the database copy taken with the session", name, orNone(m.Current.Storage), m.Held, m.Recorded.Revision)
	case "session":
		return fmt.Sprintf("%s is a copy of session %s, whose history is in %s: chat on the original, or start a new session", name, m.Recorded.Session, orNone(m.Recorded.Storage))
	case "plugin":
		return fmt.Sprintf("%s was written by plugin %s, not %s: pass --plugin %s, or start a new session", name, m.Recorded.Plugin, m.Current.Plugin, m.Recorded.Plugin)
	}
	old, cur := m.Recorded.Version, m.Current.Version
	if m.Field == "sha256" {
		old, cur = shortSum(m.Recorded.SHA256), shortSum(m.Current.SHA256)
	}
	return fmt.Sprintf("%s was written by another build of plugin %s (%s %s then, %s now): pass --accept-new-build to continue it with this build", name, m.Recorded.Plugin, m.Field, orNone(old), orNone(cur))
}

func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// sessionName names the session in a message.
func (c *chatSetup) sessionName() string {
	switch {
	case c.store != nil:
		return fmt.Sprintf("session %s in %s", c.session.SessionID, c.store.describe())
	case c.file != nil:
		return "session file " + c.file.path
	}
	return "the session"
}

// status is what the status lines after an answer say.
type status struct {
	history string // where the history goes
	session string // where the session is, and its revision
	service string // the service's conversation id, if any
}

// runAdvice says what to do about a failed run.
func runAdvice(err error, l host.Limits) string {
	if a := limitAdvice(err, l); a != "" {
		return a
	}
	if a := pluginAdvice(err); a != "" {
		return a
	}
	switch {
	case errors.Is(err, session.ErrStaleRevision):
		return fmt.Sprintf("other processes kept saving the session meanwhile (%d attempts): run the command again, or let one chat at a time use the session", staleAttempts)
	case errors.Is(err, txn.ErrBusy):
		return fmt.Sprintf("other processes kept the SQLite database locked (%d attempts): run the command again; for many chats at once keep sessions in PostgreSQL (--store postgres)", staleAttempts)
	case errors.Is(err, session.ErrRevisionExhausted):
		return "the session has reached its largest revision and cannot be saved again: continue the conversation in a new session"
	case errors.Is(err, host.ErrStateVersion):
		return "chat on it with the build of the plugin that wrote it, or one that reads its state version; or start a new session"
	case errors.Is(err, host.ErrInvalidSession), errors.Is(err, host.ErrInvalidState):
		return "the session does not fit this plugin; check it with 'wasmhist session validate' or start a new session"
	case errors.Is(err, agent.ErrHistoryConflict):
		return "the model service keeps this conversation itself; use the model the session was started with, or a new session"
	case errors.Is(err, context.Canceled):
		return "interrupted"
	default:
		return describePlace(failurePlace(err))
	}
}

// printToolActivity prints each tool call the run made, with its
// arguments and result.
func printToolActivity(w io.Writer, msgs []abi.Message) {
	type call struct{ name, args string }
	calls := map[string]call{}
	var order []string
	results := map[string]string{}
	for _, m := range msgs {
		for _, c := range m.Contents {
			switch c.Type {
			case abi.ContentFunctionCall:
				calls[c.CallID] = call{c.Name, compactJSON(c.Arguments)}
				order = append(order, c.CallID)
			case abi.ContentFunctionResult:
				if c.Error != "" {
					results[c.CallID] = "error: " + c.Error
				} else {
					results[c.CallID] = compactJSON(c.Result)
				}
			}
		}
	}
	for _, id := range order {
		r, ok := results[id]
		if !ok {
			r = "(not run)"
		}
		fmt.Fprintf(w, "tool: %s %s -> %s\n", calls[id].name, calls[id].args, r)
	}
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// warnLogger prints the agent's warnings (for example a service that keeps
// the conversation while the plugin keeps a copy) as plain lines like the
// command's other messages: "wasmhist CMD: warning: MSG (key: value, ...)".
func warnLogger(w io.Writer, cmd string) *slog.Logger {
	return slog.New(&warnHandler{mu: &sync.Mutex{}, w: w, prefix: "wasmhist " + cmd + ": warning: "})
}

// warnHandler is the slog.Handler of warnLogger: warnings and errors, one
// line each, with no time, level or key=value quoting.
type warnHandler struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	attrs  []slog.Attr
}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	var parts []string
	add := func(a slog.Attr) bool {
		if a.Key != "" {
			parts = append(parts, a.Key+": "+oneLine(a.Value.String()))
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	line := h.prefix + oneLine(r.Message)
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := fmt.Fprintln(h.w, line)
	return err
}

func (h *warnHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clip(h.attrs), attrs...)
	return &c
}

func (h *warnHandler) WithGroup(string) slog.Handler { return h }

// isTerminal reports whether r is an interactive terminal, where a prompt
// helps; piped input gets none, so output stays clean for scripts.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newRunID returns a random run id for agent.RunOptions.RunID.
func newRunID() string {
	b := make([]byte, 16)
	crand.Read(b)
	return hex.EncodeToString(b)
}

// staleAttempts bounds the runs of one line when other processes commit
// the session meanwhile.
const staleAttempts = 5

// run answers one line. When another process committed the session
// meanwhile (session.ErrStaleRevision) and this run committed nothing, the
// line is run again on the session as now stored, up to staleAttempts
// times with a short jittered pause, and a note says so.
func (c *chatSetup) run(ctx context.Context, e *env, cmd string, input []abi.Message, decisions []agent.Decision) (*agent.RunResult, error) {
	// One run id for every attempt at the line: an attempt whose commit
	// landed although its answer was lost is then not stored twice.
	opts := &agent.RunOptions{AcceptNewBuild: c.acceptNewBuild, RunID: newRunID(), Decisions: decisions}
	for attempt := 1; ; attempt++ {
		before := c.session.Revision
		res, err := c.agent.Run(ctx, c.session, input, opts)
		busy := errors.Is(err, txn.ErrBusy)
		if !(busy || errors.Is(err, session.ErrStaleRevision) && c.reload != nil) || c.session.Revision != before || attempt == staleAttempts {
			return res, err
		}
		if busy {
			fmt.Fprintf(e.stderr, "wasmhist %s: note: another process kept the database busy; running the message again (attempt %d of %d)\n",
				cmd, attempt+1, staleAttempts)
		} else {
			fresh, lerr := c.reload(ctx)
			if lerr != nil {
				return nil, fmt.Errorf("%w; reloading the session: %w", err, lerr)
			}
			if errors.Is(err, session.ErrStoreRepaired) {
				fmt.Fprintf(e.stderr, "wasmhist %s: note: %s was at revision %d, its database at %d (a chat ended before saving the session, or it was restored from an older copy): it was brought up to date; running the message again (attempt %d of %d)\n",
					cmd, c.sessionName(), before, fresh.Revision, attempt+1, staleAttempts)
			} else {
				fmt.Fprintf(e.stderr, "wasmhist %s: note: another process saved session %s meanwhile (revision %d, now %d); running the message again on its version (attempt %d of %d)\n",
					cmd, fresh.SessionID, before, fresh.Revision, attempt+1, staleAttempts)
			}
			c.session = fresh
		}
		pause := time.Duration(attempt)*50*time.Millisecond + time.Duration(rand.Int64N(int64(50*time.Millisecond)))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// chatDetails is what 'wasmhist help chat' adds to the flags.
const chatDetails = `  Each answer prints the tool calls (name, arguments, result) and the reply; after the first
  answer, and whenever it changes (every answer with --status), where the history goes
  (plugin and sha256 prefix, state key, database) and where the session is.

  Sessions. A session file of any name is created when missing and resumed otherwise; a
  plugin that wants sql gets the database beside it (FILE.db) unless --db says otherwise.
  With --store, --session is the session's id in the store. The database and the session
  are checked before the first model call. A database is recognised by what it holds, not
  by its path: a session moved together with its database (FILE.db beside it) resumes as
  it is, and one whose database went elsewhere resumes with --db naming the new place.
  A session in a PostgreSQL --store whose history is in the store's own database (--db
  naming the same one) resumes without --db; another history in PostgreSQL needs --db again.

  Another build. A session resumed with a database that does not hold it as last saved,
  or with another build of its plugin (version or sha256), is refused before any model
  call, saying what differs. --accept-new-build upgrades the session to the loaded build
  (its migrate_state runs if the state version changed); a database that does not hold
  the session is never accepted.

  Other processes. When another process saved the session meanwhile, or kept its SQLite
  database locked past the host's wait, the message runs again (up to 5 attempts, with a
  note on standard error), then fails with advice.

  Models. offline needs no network or key; openai-chat and openai-responses read
  OPENAI_API_KEY, and --base-url reaches any OpenAI-compatible server (vLLM, llama.cpp,
  Ollama). With openai-responses the service keeps the conversation and later runs
  continue it by id; the plugin keeps a store-only copy, which history reads.

  At a terminal. A failed message is reported in one line and the prompt comes back, the
  session as before; Ctrl-D or /exit ends the chat, with status 1 when its last message
  failed. Ctrl-C during an answer cancels that turn; Ctrl-C at the prompt ends the chat
  (status 130). Lines are edited with the arrow and Emacs keys; the up arrow recalls
  earlier lines, kept in $XDG_STATE_HOME/wasmhist/chat_history (default ~/.local/state).
  Piped input stops at the first failure; a line may be up to 8 MiB, blank lines are
  skipped.`
