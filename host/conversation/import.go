package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// Errors of Import and Fork. Test with errors.Is.
var (
	// ErrSessionExists: the target store already holds a session with the
	// id being written. Nothing was written; import under another id, or
	// set ImportOptions.Force to replace it.
	ErrSessionExists = errors.New("conversation: the target store already holds the session")
	// ErrHistoryRefused: a target plugin refused a page of the history (a
	// bounded plugin, a message it cannot keep, a page over the host's
	// input limit). The error is a *RefusedError naming the slot and the
	// messages. Nothing was written.
	ErrHistoryRefused = errors.New("conversation: the target plugin refused the history")
	// ErrNoPlugin: a slot of the history has no plugin to take it (or, in
	// Fork, to read it from).
	ErrNoPlugin = errors.New("conversation: no plugin for the slot")
	// ErrInvalidTarget: a Target, a session's fields or a slot list Import
	// cannot use as given.
	ErrInvalidTarget = errors.New("conversation: invalid import")
)

// Target is where Import and Fork write a session: its history into
// plugins, by state key, and the session into a store.
type Target struct {
	// Store receives the session. It must be able to say whether it holds
	// the session already: a store.Store (store.Dir, sqlitestore,
	// pgstore), or a *store.File.
	Store store.Saver
	// Plugins take the history, by state key: each slot of the session is
	// written through Plugins[key].Provider(key).
	Plugins map[string]*host.Plugin
	// Log receives the warning of a commit that completed in its
	// databases but not in its store (see host/internal/txn); nil
	// discards it.
	Log *slog.Logger
}

// SlotHistory is one state key's history, oldest message first. Import ranges
// over each History once, in the order of the slots; ImportSlots takes the
// slots one at a time, so a reader of one stream can hand them out as it
// meets them, in whatever order they come.
type SlotHistory struct {
	Key     string
	History iter.Seq2[abi.Message, error]
}

// ImportOptions tune Import; the zero value is the common case.
type ImportOptions struct {
	// Force replaces a session the target store holds under the same id:
	// the history its slots keep in the target plugins' storage is
	// cleared in the import's transaction, and the imported session gets
	// a revision above the one it replaces. Without it such an import is
	// refused with ErrSessionExists.
	Force bool
	// PageMessages and PageBytes bound one store call: a page ends at
	// the first message after either bound where no tool call of the page
	// waits for its result. Zero means DefaultPageMessages and
	// DefaultPageBytes.
	PageMessages int
	PageBytes    int
}

// Page bounds of an import's store calls: 128 messages (the sample sqlite
// plugin writes a row a message, under the sql capability's 256 statements
// a request) or 1 MiB of JSON, an eighth of the host's default input limit
// (host.DefaultLimits), so a page with the plugin's state and the request
// envelope stays under it. A page refused as too large is split.
const (
	DefaultPageMessages = 128
	DefaultPageBytes    = 1 << 20
)

// RefusedError is the ErrHistoryRefused of one slot: which messages of
// the slot's history (counted from 0) the plugin's store refused.
type RefusedError struct {
	Key         string
	Plugin      string
	First, Last int
	Err         error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("conversation: plugin %s refused messages %d to %d of slot %q: %v\n"+
		"nothing was imported; choose a plugin that keeps the whole history (a bounded one configured to admit it)",
		e.Plugin, e.First, e.Last, e.Key, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrHistoryRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrHistoryRefused }

// Import writes a session into a fresh state of the target's plugins and
// into its store, all or nothing, and returns the session as stored.
//
// From fields it takes the session id, service conversation, revision,
// pending tool calls, recent runs and compaction records
// (Session.Compactions); its State and Provenance are not
// used: each slot's history is written into a fresh state by calling the
// plugin's store with pages of messages (see ImportOptions), which every
// ABI 1.0 plugin has, and the provenance is the target's. A page never
// separates a tool call from its result.
//
// Every store call runs in one transaction (txn.Txn), committed with the
// session save as an agent run commits: the plugins' databases, the
// journal and the session row go in one commit, so a failure at any point
// leaves nothing behind. A plugin that keeps the history in the session
// itself writes nothing anywhere before the session is saved.
func Import(ctx context.Context, fields *session.Session, slots []SlotHistory, to Target, opts *ImportOptions) (*session.Session, error) {
	return importAll(ctx, fields, slots, to, opts, nil)
}

// importAll is importSession with the slots known in advance, each
// checked against the target before anything is read.
func importAll(ctx context.Context, fields *session.Session, slots []SlotHistory, to Target, opts *ImportOptions, finish func(*session.Session)) (*session.Session, error) {
	seen := map[string]bool{}
	for _, sl := range slots {
		if err := checkSlot(seen, sl, to); err != nil {
			return nil, err
		}
	}
	return importSession(ctx, fields, func(yield func(SlotHistory, error) bool) {
		for _, sl := range slots {
			if !yield(sl, nil) {
				return
			}
		}
	}, to, opts, finish)
}

// ImportSlots is Import with the slots given one at a time, in any order:
// a slot is written when slots yields it, and an error slots yields ends
// the import with nothing written. It is how a portable document, read as
// a stream (portable.Reader), imports in bounded memory whatever the order
// of its slots. Every slot yielded needs its plugin in to.Plugins; a slot
// given twice is refused.
func ImportSlots(ctx context.Context, fields *session.Session, slots iter.Seq2[SlotHistory, error], to Target, opts *ImportOptions) (*session.Session, error) {
	return importSession(ctx, fields, slots, to, opts, nil)
}

// importSession is ImportSlots with a last look at the session before it
// commits (Fork keeps pending calls only when it copied the whole
// history).
func importSession(ctx context.Context, fields *session.Session, slots iter.Seq2[SlotHistory, error], to Target, opts *ImportOptions, finish func(*session.Session)) (*session.Session, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	if o.PageMessages <= 0 {
		o.PageMessages = DefaultPageMessages
	}
	if o.PageBytes <= 0 {
		o.PageBytes = DefaultPageBytes
	}
	if err := checkImport(fields, to); err != nil {
		return nil, err
	}
	id := fields.SessionID
	existing, err := loadExisting(ctx, to.Store, id)
	if err != nil {
		return nil, err
	}
	if existing != nil && !o.Force {
		return nil, fmt.Errorf("%w: session %q is at revision %d there; import it under another id, or force it to replace that session",
			ErrSessionExists, id, existing.Revision)
	}
	next := &session.Session{
		SchemaVersion:    session.SchemaVersion,
		SessionID:        id,
		ServiceSessionID: fields.ServiceSessionID,
		Revision:         max(fields.Revision, 1),
		PendingToolCalls: slices.Clone(fields.PendingToolCalls),
		RecentRuns:       slices.Clone(fields.RecentRuns),
		Compactions:      maps.Clone(fields.Compactions),
	}
	if existing != nil {
		next.Revision = max(next.Revision, existing.Revision+1)
	}
	if next.Revision > session.MaxRevision {
		return nil, fmt.Errorf("conversation: import session %q at revision %d: %w", id, next.Revision, session.ErrRevisionExhausted)
	}

	tx := txn.New()
	tctx := txn.With(ctx, tx)
	fail := func(err error) (*session.Session, error) {
		tx.Rollback(ctx)
		return nil, err
	}
	if existing != nil {
		if err := clearReplaced(tctx, existing, to); err != nil {
			return fail(err)
		}
	}
	seen := map[string]bool{}
	for sl, err := range slots {
		if err != nil {
			return fail(fmt.Errorf("conversation: import session %q: %w", id, err))
		}
		if err := checkSlot(seen, sl, to); err != nil {
			return fail(err)
		}
		p := to.Plugins[sl.Key]
		if err := writeSlot(tctx, next, p, sl, o); err != nil {
			return fail(err)
		}
		if _, stored := next.State[sl.Key]; !stored {
			continue
		}
		pr, err := p.Provider(sl.Key).Provenance(ctx)
		if err != nil {
			return fail(fmt.Errorf("conversation: import session %q: %w", id, err))
		}
		if pr.Storage != "" {
			// The rows are this session's own: package agent runs it.
			pr.Session = id
		}
		next.SetProvenance(sl.Key, pr)
	}
	if finish != nil {
		finish(next)
	}
	txn.MarkHeld(next, tx.Targets())
	// No Load: a journal row newer than the session means the database
	// held this id before; the import is refused rather than bringing
	// that session back.
	if err := tx.CommitSession(ctx, next, txn.Store{Saver: to.Store, Log: to.Log}); err != nil {
		tx.Rollback(ctx)
		if errors.Is(err, session.ErrStaleRevision) {
			return nil, fmt.Errorf("%w: session %q was written there meanwhile, or a database's journal holds it: %w", ErrSessionExists, id, err)
		}
		return nil, fmt.Errorf("conversation: import session %q: %w", id, err)
	}
	return next.Clone(), nil
}

func checkImport(fields *session.Session, to Target) error {
	switch {
	case fields == nil:
		return fmt.Errorf("%w: nil session", ErrInvalidTarget)
	case fields.SessionID == "":
		return fmt.Errorf("%w: the session has no id", ErrInvalidTarget)
	case to.Store == nil:
		return fmt.Errorf("%w: no session store to import into", ErrInvalidTarget)
	}
	return nil
}

// checkSlot checks one slot of an import against the target and the
// slots seen before it, and adds it to them.
func checkSlot(seen map[string]bool, sl SlotHistory, to Target) error {
	switch {
	case seen[sl.Key]:
		return fmt.Errorf("%w: slot %q given twice", ErrInvalidTarget, sl.Key)
	case to.Plugins[sl.Key] == nil:
		return fmt.Errorf("%w: slot %q: give the target a plugin for it", ErrNoPlugin, sl.Key)
	case sl.History == nil:
		return fmt.Errorf("%w: slot %q has no history", ErrInvalidTarget, sl.Key)
	}
	seen[sl.Key] = true
	return nil
}

// loadExisting returns the session the store holds under id, or nil.
func loadExisting(ctx context.Context, saver store.Saver, id string) (*session.Session, error) {
	var (
		s   *session.Session
		err error
	)
	switch st := saver.(type) {
	case store.Store:
		s, err = st.Load(ctx, id)
	case *store.File:
		s, err = st.Load(ctx)
	default:
		return nil, fmt.Errorf("%w: the target store (%T) cannot load, so an import cannot tell whether it would replace a session: use a store.Store or a *store.File",
			ErrInvalidTarget, saver)
	}
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("conversation: import session %q: reading the target store: %w", id, err)
	}
	return s, nil
}

// clearReplaced clears, in the import's transaction, the history a
// replaced session keeps in the target plugins' storage: the slots whose
// recorded provenance is the target plugin's own storage, for this
// session. A slot kept elsewhere (another database, or the session's own
// state, which the import replaces anyway) is not the target's to clear.
func clearReplaced(ctx context.Context, old *session.Session, to Target) error {
	keys := make([]string, 0, len(old.State))
	for k := range old.State {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		p := to.Plugins[key]
		rec, ok := old.Provenance[key]
		if p == nil || !ok || rec.Storage == "" || old.State[key].Provider != p.Info().Name {
			continue
		}
		cur, err := p.Provider(key).Provenance(ctx)
		if err != nil {
			return fmt.Errorf("conversation: replacing session %q: %w", old.SessionID, err)
		}
		if cur.Storage != rec.Storage || (rec.Session != "" && rec.Session != old.SessionID) {
			continue
		}
		if err := p.Clear(ctx, old.Clone(), key); err != nil && !errors.Is(err, host.ErrUnsupported) {
			return fmt.Errorf("conversation: replacing session %q: clearing slot %q: %w", old.SessionID, key, err)
		}
	}
	return nil
}

// writeSlot stores a slot's history into s through p, page by page.
func writeSlot(ctx context.Context, s *session.Session, p *host.Plugin, sl SlotHistory, o ImportOptions) error {
	pp := p.Provider(sl.Key)
	var (
		page   []abi.Message
		bytes  int
		stored int
		open   = map[string]bool{} // calls of the page without a result yet
	)
	// put stores page, the slot's messages from first on. A page the
	// plugin or the host refuses as too large (a plugin's cap on
	// statements or rows, the host's input limit) is stored in two halves,
	// split where no call of the page waits for its result, down to pages
	// that cannot be split: the refusal then names the messages it is about.
	var put func(page []abi.Message, first int) error
	put = func(page []abi.Message, first int) error {
		err := pp.Store(ctx, s, page, nil)
		if err == nil {
			return nil
		}
		if tooLarge(err) {
			if i := splitPoint(page); i > 0 {
				if err := put(page[:i], first); err != nil {
					return err
				}
				return put(page[i:], first+i)
			}
		}
		if refused(err) {
			return &RefusedError{Key: sl.Key, Plugin: p.Info().Name, First: first, Last: first + len(page) - 1, Err: err}
		}
		return fmt.Errorf("conversation: storing messages %d to %d of slot %q: %w", first, first+len(page)-1, sl.Key, err)
	}
	flush := func() error {
		if len(page) == 0 {
			return nil
		}
		if err := put(page, stored); err != nil {
			return err
		}
		stored += len(page)
		page, bytes = page[:0], 0
		return nil
	}
	for m, err := range sl.History {
		if err != nil {
			return fmt.Errorf("conversation: reading message %d of slot %q: %w", stored+len(page), sl.Key, err)
		}
		if isInput(m) {
			// A call still open at the next input is never answered: in
			// a stored history the answers to a run's calls come before
			// the next run's input.
			clear(open)
		}
		if len(open) == 0 && (len(page) >= o.PageMessages || bytes >= o.PageBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		size, err := messageSize(m)
		if err != nil {
			return fmt.Errorf("conversation: message %d of slot %q: %w", stored+len(page), sl.Key, err)
		}
		page = append(page, m)
		bytes += size
		for _, id := range m.CallIDs() {
			open[id] = true
		}
		for _, id := range m.ResultIDs() {
			delete(open, id)
		}
	}
	return flush()
}

// tooLarge reports a refusal of a page that a smaller page may avoid.
func tooLarge(err error) bool {
	return errors.Is(err, abi.ErrResourceExhausted) || errors.Is(err, host.ErrInputTooLarge) ||
		errors.Is(err, host.ErrOutputTooLarge) || errors.Is(err, host.ErrMemoryLimit)
}

// splitPoint is the index nearest the middle of page where no call of
// page[:i] waits for its result, or 0 when there is none.
func splitPoint(page []abi.Message) int {
	open := map[string]bool{}
	best := 0
	for i, m := range page[:len(page)-1] {
		for _, id := range m.CallIDs() {
			open[id] = true
		}
		for _, id := range m.ResultIDs() {
			delete(open, id)
		}
		if len(open) == 0 && (best == 0 || abs(i+1-len(page)/2) < abs(best-len(page)/2)) {
			best = i + 1
		}
	}
	return best
}

func abs(x int) int { return max(x, -x) }

// refused reports a store error that is the plugin's or the host's answer
// to what was sent, not a failure of the storage under it.
func refused(err error) bool {
	var ae *abi.Error
	return errors.As(err, &ae) || errors.Is(err, host.ErrInputTooLarge) || errors.Is(err, host.ErrInvalidOutput) ||
		errors.Is(err, host.ErrOutputTooLarge) || errors.Is(err, host.ErrMemoryLimit) || errors.Is(err, host.ErrTrap)
}

func messageSize(m abi.Message) (int, error) {
	b, err := json.Marshal(&m)
	return len(b), err
}

// isInput reports whether m is a run's input (what starts a turn): a
// user or system message that answers no tool call.
func isInput(m abi.Message) bool {
	return (m.Role == abi.RoleUser || m.Role == abi.RoleSystem) && len(m.ResultIDs()) == 0
}
