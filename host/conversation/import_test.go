package conversation_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
	"github.com/wasmhist/wasmhist/internal/pgtest"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

const key = "history"

// toolModel answers an input "q" with a call of tool lookup (call id
// "c-q") and the tool's result with the text "answer to q": every turn
// stores four messages, a call and its result among them.
type toolModel struct{}

func (toolModel) Complete(_ context.Context, req model.Request) (*model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if ids := last.ResultIDs(); len(ids) > 0 {
		q := strings.TrimPrefix(ids[0], "c-")
		return &model.Response{Messages: []abi.Message{abi.NewMessage(abi.RoleAssistant, "answer to "+q)}}, nil
	}
	q := last.TextContent()
	args, _ := json.Marshal(map[string]string{"q": q})
	call := abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "c-" + q, Name: "lookup", Arguments: args}}}
	return &model.Response{Messages: []abi.Message{call}}, nil
}

func (m toolModel) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		r, err := m.Complete(ctx, req)
		if err != nil {
			yield(model.Update{}, err)
			return
		}
		yield(model.Update{Role: abi.RoleAssistant, Contents: r.Messages[0].Contents}, nil)
	}
}

func lookup() agent.Tool {
	return agent.Tool{Name: "lookup", Func: func(_ context.Context, args json.RawMessage) (any, error) {
		return map[string]string{"found": string(args)}, nil
	}}
}

// chat runs one turn per input on s, committed to saver.
func chat(t testing.TB, p *host.Plugin, saver store.Saver, s *session.Session, inputs ...string) {
	t.Helper()
	a, err := agent.New(agent.Config{
		Model:     toolModel{},
		Tools:     []agent.Tool{lookup()},
		Providers: []agent.ProviderConfig{{Provider: p.Provider(key)}},
		Saver:     saver,
	})
	require.NoError(t, err)
	for _, in := range inputs {
		_, err := a.Run(context.Background(), s, []abi.Message{abi.NewMessage(abi.RoleUser, in)}, nil)
		require.NoError(t, err, "turn %q of session %s", in, s.SessionID)
	}
}

// history lists everything p keeps for s under key, with small pages so
// that paging is exercised.
func history(t testing.TB, p *host.Plugin, s *session.Session) []abi.Message {
	t.Helper()
	var all []abi.Message
	cursor := ""
	for {
		page, next, err := p.List(context.Background(), s, key, cursor, 7)
		require.NoError(t, err)
		all = append(all, page...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

// texts renders a history as "role:text" (calls and results by id).
func texts(ms []abi.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		s := string(m.Role) + ":" + m.TextContent()
		for _, id := range m.CallIDs() {
			s += "call:" + id
		}
		for _, id := range m.ResultIDs() {
			s += "result:" + id
		}
		out[i] = s
	}
	return out
}

func values(ms []abi.Message) iter.Seq2[abi.Message, error] {
	return func(yield func(abi.Message, error) bool) {
		for _, m := range ms {
			if !yield(m, nil) {
				return
			}
		}
	}
}

// rig is the test's host, its plugins and PostgreSQL server, shared by
// the subtests of one test.
type rig struct {
	h        *host.Host
	inmemory host.PluginSource
	sqlite   host.PluginSource
	top      *testing.T // the test the server lives as long as
	pgOnce   sync.Once
	pgDSN    string
	n        int
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(ctx) })
	return &rig{
		top:      t,
		h:        h,
		inmemory: host.File(sdktest.BuildPlugin(t, "../../plugins/inmemory")),
		sqlite:   host.File(sdktest.BuildPlugin(t, "../../plugins/sqlite")),
	}
}

// dsn starts the PostgreSQL server on first use, for the whole test.
func (r *rig) dsn(*testing.T) string {
	r.pgOnce.Do(func() { r.pgDSN = pgtest.Start(r.top).DSN("postgres") })
	return r.pgDSN
}

// pairing is one plugin and one session store, fresh for a subtest. Its
// store is a factory: a store.File holds one session, so each session of
// the subtest gets its own file beside the others.
type pairing struct {
	plugin  *host.Plugin
	storeOf func(id string) store.Saver
	rows    func(t testing.TB) int // rows of the plugin's messages table; -1 without a database
	db      string                 // the SQLite file of the plugin and of sqlitestore
}

type pluginKind string

const (
	inMemory       pluginKind = "inmemory"
	sqliteOnSQLite pluginKind = "sqlite-on-SQLite"
	sqliteOnPG     pluginKind = "sqlite-on-PostgreSQL"
)

type storeKind string

const (
	fileStore   storeKind = "File"
	dirStore    storeKind = "Dir"
	sqliteStore storeKind = "sqlitestore"
	pgStore     storeKind = "pgstore"
)

var (
	pluginKinds = []pluginKind{inMemory, sqliteOnSQLite, sqliteOnPG}
	storeKinds  = []storeKind{fileStore, dirStore, sqliteStore, pgStore}
)

// pair builds a pairing. The sqlite plugin on SQLite shares its file with
// sqlitestore, and on PostgreSQL its database with pgstore, so that those
// pairings commit the session in the plugin's own transaction.
func (r *rig) pair(t *testing.T, pk pluginKind, sk storeKind) *pairing {
	t.Helper()
	ctx := context.Background()
	r.n++
	dir := t.TempDir()
	db := filepath.Join(dir, "history.db")
	name, data, hostSchema := fmt.Sprint("db", r.n), fmt.Sprint("data", r.n), fmt.Sprint("host", r.n)
	pr := &pairing{rows: func(testing.TB) int { return -1 }, db: db}
	var opts host.LoadOptions
	switch pk {
	case sqliteOnSQLite:
		opts.Grants = []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}
		pr.rows = func(t testing.TB) int { return sqliteRows(t, db) }
	case sqliteOnPG:
		dsn := r.dsn(t)
		opts.Grants = []host.Grant{pggrant.New(pggrant.Config{Name: name, AdminDSN: dsn, Schema: data, HostSchema: hostSchema})}
		pr.rows = func(t testing.TB) int { return pgCount(t, dsn, data) }
	}
	src := r.inmemory
	if pk != inMemory {
		src = r.sqlite
	}
	p, err := r.h.Load(ctx, src, opts)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(ctx) })
	pr.plugin = p
	switch sk {
	case fileStore:
		pr.storeOf = func(id string) store.Saver { return store.NewFile(filepath.Join(dir, id+".json")) }
	case dirStore:
		st, err := store.NewDir(filepath.Join(dir, "sessions"))
		require.NoError(t, err)
		pr.storeOf = func(string) store.Saver { return st }
	case sqliteStore:
		st, err := sqlitestore.Open(db)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		pr.storeOf = func(string) store.Saver { return st }
	case pgStore:
		st, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: r.dsn(t), Name: name, Schema: hostSchema})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		pr.storeOf = func(string) store.Saver { return st }
	}
	return pr
}

func (pr *pairing) target(id string) conversation.Target {
	return conversation.Target{Store: pr.storeOf(id), Plugins: map[string]*host.Plugin{key: pr.plugin}}
}

// load reads session id back from its store.
func (pr *pairing) load(t testing.TB, id string) (*session.Session, error) {
	t.Helper()
	switch st := pr.storeOf(id).(type) {
	case *store.File:
		return st.Load(context.Background())
	case store.Store:
		return st.Load(context.Background(), id)
	}
	t.Fatalf("store %T cannot load", pr.storeOf(id))
	return nil, nil
}

func sqliteRows(t testing.TB, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var n int
	err = db.QueryRow(`SELECT count(*) FROM messages`).Scan(&n)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return 0
	}
	require.NoError(t, err)
	return n
}

func pgCount(t testing.TB, dsn, schema string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "messages"}.Sanitize()).Scan(&n)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table: nothing stored yet
		return 0
	}
	require.NoError(t, err)
	return n
}

// TestImportRoundTrip: for every pairing of plugin and session store, a
// session chatted with tool calls is imported under a new id into the
// same plugin and store; the copy's history reads back identical message
// by message, the copy is stored as returned, chatting on the copy never
// changes the original, and chatting on the original never changes the
// copy.
func TestImportRoundTrip(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, pk := range pluginKinds {
		for _, sk := range storeKinds {
			t.Run(string(pk)+"/"+string(sk), func(t *testing.T) {
				pr := r.pair(t, pk, sk)
				orig := session.New()
				chat(t, pr.plugin, pr.storeOf(orig.SessionID), orig, "q1", "q2", "q3")
				want := history(t, pr.plugin, orig)
				require.Len(t, want, 12)

				fields := orig.Clone()
				fields.SessionID = "copy-" + orig.SessionID
				cp, err := conversation.Import(ctx, fields, []conversation.SlotHistory{{Key: key, History: values(want)}},
					pr.target(fields.SessionID), &conversation.ImportOptions{PageMessages: 5})
				require.NoError(t, err)
				assert.Equal(t, want, history(t, pr.plugin, cp), "the copy's history, message by message")
				assert.Equal(t, orig.Revision, cp.Revision, "the copy keeps the revision")
				stored, err := pr.load(t, cp.SessionID)
				require.NoError(t, err)
				assert.Equal(t, cp, stored, "the store holds the session Import returned")
				if pk != inMemory {
					assert.NotEqual(t, orig.State[key].Data, cp.State[key].Data, "the copy has rows of its own")
					assert.Equal(t, cp.SessionID, cp.Provenance[key].Session)
				}

				chat(t, pr.plugin, pr.storeOf(cp.SessionID), cp, "copy-q4")
				origNow, err := pr.load(t, orig.SessionID)
				require.NoError(t, err)
				assert.Equal(t, want, history(t, pr.plugin, origNow), "chatting on the copy changed the original")
				assert.Equal(t, append(texts(want), "user:copy-q4", "assistant:call:c-copy-q4", "tool:result:c-copy-q4", "assistant:answer to copy-q4"),
					texts(history(t, pr.plugin, cp)))

				copyHist := history(t, pr.plugin, cp)
				chat(t, pr.plugin, pr.storeOf(orig.SessionID), origNow, "orig-q4")
				assert.Equal(t, copyHist, history(t, pr.plugin, cp), "chatting on the original changed the copy")
				assert.Len(t, history(t, pr.plugin, origNow), 16)
			})
		}
	}
}

// boundedProvider is a third-party plugin of ABI 1.0 with only describe,
// provide and store, that keeps at most max messages in the session's
// state and refuses a store past them.
type boundedProvider struct{ max int }

type boundedState struct {
	Messages []json.RawMessage `json:"messages"`
}

func (b boundedProvider) Describe() abi.PluginInfo {
	return abi.PluginInfo{
		Name: "bounded", Version: "1.0.0", ABI: "1.0", StateVersion: 1,
		StateSchema:  json.RawMessage(`{"type":"object","properties":{"messages":{"type":"array"}}}`),
		InitialState: json.RawMessage(`{"messages":[]}`),
	}
}

func (b boundedProvider) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	var st boundedState
	if err := json.Unmarshal(req.State, &st); err != nil {
		return nil, err
	}
	return &abi.ProvideResponse{Messages: st.Messages}, nil
}

func (b boundedProvider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	var st boundedState
	if err := json.Unmarshal(req.State, &st); err != nil {
		return nil, err
	}
	if n := len(st.Messages) + len(req.RequestMessages) + len(req.ResponseMessages); n > b.max {
		return nil, &abi.Error{Code: abi.CodeResourceExhausted, Message: fmt.Sprintf("bounded: %d messages, at most %d", n, b.max)}
	}
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/messages", req.RequestMessages, req.ResponseMessages)}}, nil
}

// turnsOfChat is n turns of the conversation toolModel holds, as stored.
func turnsOfChat(n int) []abi.Message {
	var ms []abi.Message
	for i := 1; i <= n; i++ {
		q := fmt.Sprint("q", i)
		args, _ := json.Marshal(map[string]string{"q": q})
		ms = append(ms,
			abi.Message{Role: abi.RoleUser, Contents: []abi.Content{abi.Text(q)}, Source: &abi.Source{Type: abi.SourceExternal}},
			abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "c-" + q, Name: "lookup", Arguments: args}}},
			abi.Message{Role: abi.RoleTool, Contents: []abi.Content{{Type: abi.ContentFunctionResult, CallID: "c-" + q, Result: json.RawMessage(`{"found":"x"}`)}}},
			abi.NewMessage(abi.RoleAssistant, "answer to "+q),
		)
	}
	return ms
}

// TestImportOfARefusedHistory: a plugin that refuses the history (a
// bounded one, past its bound) fails the import with a *RefusedError
// naming the slot and the refused messages, and nothing is stored.
func TestImportOfARefusedHistory(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	defer h.Close(ctx)
	p, err := h.LoadNative(ctx, "bounded", sdk.Handler(boundedProvider{max: 5}), host.LoadOptions{})
	require.NoError(t, err)
	st, err := store.NewDir(t.TempDir())
	require.NoError(t, err)
	to := conversation.Target{Store: st, Plugins: map[string]*host.Plugin{key: p}}

	fields := &session.Session{SessionID: "refused", Revision: 3}
	_, err = conversation.Import(ctx, fields, []conversation.SlotHistory{{Key: key, History: values(turnsOfChat(3))}}, to, &conversation.ImportOptions{PageMessages: 4})
	require.ErrorIs(t, err, conversation.ErrHistoryRefused)
	var re *conversation.RefusedError
	require.ErrorAs(t, err, &re)
	// The refused page (messages 4 to 7) is split until what remains
	// cannot be: message 4 fits the bound, the call and its result (5, 6)
	// are refused together.
	assert.Equal(t, conversation.RefusedError{Key: key, Plugin: "bounded", First: 5, Last: 6, Err: re.Err}, *re)
	require.ErrorIs(t, err, abi.ErrResourceExhausted, "the plugin's own code")
	assert.Contains(t, err.Error(), "nothing was imported")
	_, err = st.Load(ctx, "refused")
	require.ErrorIs(t, err, session.ErrNotFound, "a refused import stored the session")

	// Within its bound the same plugin takes a history.
	got, err := conversation.Import(ctx, fields, []conversation.SlotHistory{{Key: key, History: values(turnsOfChat(1))}}, to, nil)
	require.NoError(t, err)
	msgs, err := p.Provider(key).Provide(ctx, got.Clone(), nil)
	require.NoError(t, err)
	assert.Equal(t, texts(turnsOfChat(1)), texts(msgs))
}

// failAfter yields ms, then fails as a malformed document would.
func failAfter(ms []abi.Message) iter.Seq2[abi.Message, error] {
	return func(yield func(abi.Message, error) bool) {
		for _, m := range ms {
			if !yield(m, nil) {
				return
			}
		}
		yield(abi.Message{}, errors.New("document truncated"))
	}
}

// TestImportIsAllOrNothing: an import that fails after pages of its
// history reached the plugin's database leaves no row and no session;
// an existing session is refused without Force and left as it was, and
// replaced with Force, its rows in the target plugin's storage cleared in
// the same commit.
func TestImportIsAllOrNothing(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	pairings := []struct {
		plugin pluginKind
		store  storeKind
	}{
		{inMemory, fileStore},
		{sqliteOnSQLite, sqliteStore},
		{sqliteOnSQLite, dirStore},
		{sqliteOnPG, pgStore},
		{sqliteOnPG, fileStore},
	}
	for _, pp := range pairings {
		t.Run(string(pp.plugin)+"/"+string(pp.store), func(t *testing.T) {
			pr := r.pair(t, pp.plugin, pp.store)
			hist := turnsOfChat(4)
			slot := func(h iter.Seq2[abi.Message, error]) []conversation.SlotHistory {
				return []conversation.SlotHistory{{Key: key, History: h}}
			}

			_, err := conversation.Import(ctx, &session.Session{SessionID: "s1"}, slot(failAfter(hist[:10])), pr.target("s1"), &conversation.ImportOptions{PageMessages: 4})
			require.ErrorContains(t, err, "document truncated")
			require.ErrorContains(t, err, `reading message 10 of slot "history"`)
			_, err = pr.load(t, "s1")
			require.ErrorIs(t, err, session.ErrNotFound, "a failed import stored the session")
			assert.LessOrEqual(t, pr.rows(t), 0, "a failed import left rows in the plugin's database")

			first, err := conversation.Import(ctx, &session.Session{SessionID: "s1", Revision: 2}, slot(values(hist[:8])), pr.target("s1"), &conversation.ImportOptions{PageMessages: 4})
			require.NoError(t, err)
			rows := pr.rows(t)

			_, err = conversation.Import(ctx, &session.Session{SessionID: "s1", Revision: 9}, slot(values(hist)), pr.target("s1"), nil)
			require.ErrorIs(t, err, conversation.ErrSessionExists)
			assert.ErrorContains(t, err, "force")
			stored, err := pr.load(t, "s1")
			require.NoError(t, err)
			assert.Equal(t, first, stored, "a refused import changed the stored session")
			assert.Equal(t, rows, pr.rows(t), "a refused import changed the plugin's rows")
			assert.Equal(t, texts(hist[:8]), texts(history(t, pr.plugin, stored)))

			forced, err := conversation.Import(ctx, &session.Session{SessionID: "s1"}, slot(values(hist[8:])), pr.target("s1"), &conversation.ImportOptions{Force: true})
			require.NoError(t, err)
			assert.Equal(t, int64(3), forced.Revision, "a replacement goes above the revision it replaces")
			stored, err = pr.load(t, "s1")
			require.NoError(t, err)
			assert.Equal(t, texts(hist[8:]), texts(history(t, pr.plugin, stored)))
			if rows >= 0 {
				assert.Equal(t, 8, pr.rows(t), "the replaced session's rows remain")
			}
			chat(t, pr.plugin, pr.storeOf("s1"), stored, "q5")
			assert.Len(t, history(t, pr.plugin, stored), 12)
		})
	}
}

// TestImportSplitsAPageTooLarge: a page refused as too large (600
// messages, 150 answers of 64 KiB: over the host's 8 MiB input limit, then, halved,
// over the sql capability's 4 MiB request limit, which the sqlite plugin
// reports as resource_exhausted) is stored in halves, never splitting a
// call from its result; the whole history is imported.
func TestImportSplitsAPageTooLarge(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	pr := r.pair(t, sqliteOnSQLite, sqliteStore)
	msgs := turnsOfChat(150) // 600 messages
	pad := strings.Repeat("x", 64<<10)
	for i := 3; i < len(msgs); i += 4 {
		msgs[i] = abi.NewMessage(abi.RoleAssistant, msgs[i].Contents[0].Text+pad)
	}
	got, err := conversation.Import(ctx, &session.Session{SessionID: "big"}, []conversation.SlotHistory{{Key: key, History: values(msgs)}}, pr.target("big"), &conversation.ImportOptions{PageMessages: 600, PageBytes: 1 << 30})
	require.NoError(t, err)
	assert.Equal(t, texts(msgs), texts(history(t, pr.plugin, got)))
	assert.Equal(t, len(msgs), pr.rows(t))
	assert.Equal(t, got.Revision, got.Provenance[key].Revision, "the database holds the imported session at its revision")
}
