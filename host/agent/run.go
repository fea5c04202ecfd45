package agent

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/reducer"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// localConversationID is the sentinel conversation id PersistPerServiceCall
// hands the loop when the service does not keep the conversation: the loop
// then sends only new messages, and the middleware puts the stored history
// back before the call. It never reaches a model client.
const localConversationID = "wasmhist:local-history"

type runKey struct{}

// run is the state of one Run or RunStream. The loop and
// PersistPerServiceCall (found through the context) share it; model calls
// of a run are sequential, and mu guards against a caller's stack that
// calls the middleware concurrently anyway.
type run struct {
	a       *Agent
	target  *session.Session // the caller's session, replaced on each commit
	work    *session.Session // the run's working copy
	store   *bool
	maxIter int
	emit    func(RunUpdate) bool // nil unless streaming

	ctxMsgs []abi.Message // context-provider messages, stamped
	input   []abi.Message // the caller's messages, stamped external
	history []abi.Message // history the loop loaded (not in sentinel mode)

	// txn holds the database transactions the run's plugin calls left
	// open; each commit commits them with the session (commit.go).
	txn   *txn.Txn
	runID string // RunOptions.RunID, recorded by each commit
	// What the run returned as far as committed, and whether it finished,
	// recorded with its id by each commit (runid.go); prior is what the
	// run it continues had returned.
	reply, prior []abi.Message
	finished     bool
	inputSHA256  string // of the input it continues; "" to compute

	mode          *modeRow // computed once, in newRun
	resendContext bool     // sentinel mode: context is not in the reloaded history
	clearLoaders  bool     // ConflictClear: the loader stores nothing this run

	mu             sync.Mutex
	calls          int
	switched       bool          // sentinel mode ended: the service returned an id
	pendingInputs  []abi.Message // new request messages of the next call...
	pendingResults []abi.Message // ...and the tool results it sends
	stopped        bool          // a streaming consumer stopped early

	// Answers to the tool calls an earlier run left open, sent before the
	// input on the first call (see resume).
	resumed        []abi.Message
	resumedCalls   []ResumedCall
	pendingResumed []abi.Message          // resumed, until a call carried them
	computed       map[string]abi.Content // results tools returned in this run, by call id

	learn     []abi.Message       // what the next commit records, for AfterRunners
	decisions map[string]Decision // RunOptions.Decisions, by call id
	awaiting  bool                // the loop ended on calls that need approval
}

func runFrom(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

func (a *Agent) newRun(ctx context.Context, s *session.Session, input []abi.Message, opts *RunOptions, emit func(RunUpdate) bool) (_ *run, err error) {
	if s == nil {
		return nil, fmt.Errorf("agent: run: %w: nil session", ErrConfig)
	}
	var o RunOptions
	if opts != nil {
		o = *opts
	}
	r := &run{
		a:       a,
		target:  s,
		work:    snapshot(s),
		store:   a.cfg.Store,
		maxIter: a.cfg.MaxIterations,
		emit:    emit,
		txn:     txn.New(),
	}
	// Every plugin call of the run joins its transaction, from the first:
	// what a plugin writes while the run loads history (provide), asks for
	// context or answers open calls commits with the run or not at all.
	ctx = txn.With(ctx, r.txn)
	defer func() {
		if err != nil {
			r.rollback(ctx)
		}
	}()
	if o.Store != nil {
		r.store = o.Store
	}
	if o.MaxIterations > 0 {
		r.maxIter = o.MaxIterations
	}
	if len(o.RunID) > 256 {
		return nil, fmt.Errorf("agent: run: %w: RunID of %d bytes, at most 256", ErrConfig, len(o.RunID))
	}
	r.runID = o.RunID
	if r.decisions, err = decisions(s, o.Decisions); err != nil {
		return nil, err
	}
	if r.maxIter == 0 {
		r.maxIter = DefaultMaxIterations
	}
	if err := r.checkProvenance(ctx, o.AcceptNewBuild); err != nil {
		return nil, err
	}
	r.input = make([]abi.Message, len(input))
	for i, m := range input {
		if m.Source == nil {
			m.Source = &abi.Source{Type: abi.SourceExternal}
		}
		r.input[i] = m
	}
	loader := a.loaderConfig()
	f := facts{
		perCall:    a.cfg.RequirePerServiceCallPersistence,
		middleware: hasPersistence(a.client),
		continues:  r.work.ServiceSessionID != "",
		loader:     loader != nil,
		conflict:   a.cfg.Conflict,
	}
	if r.store != nil {
		f.keeps = *r.store
	} else {
		f.keeps = storesByDefault(a.cfg.Model) || f.continues
	}
	if loader != nil {
		f.replayable = !loader.SkipStoreInputs && !loader.SkipStoreOutputs && loader.StoreInputFilter == nil
	}
	r.mode = resolveMode(f)
	switch r.mode.mode {
	case modeRejectLocalContinuation:
		// The sentinel drives a local conversation; it cannot continue one
		// the service holds.
		return nil, fmt.Errorf("agent: run: %w: the session continues service conversation %q but the run asks the service not to store",
			ErrHistoryConflict, r.work.ServiceSessionID)
	case modeRejectConflict, modeSharedHistory, modeServiceHistory:
		if err := r.conflict(); err != nil {
			return nil, err
		}
	case modePerCallService, modeCallerService:
		if loader != nil {
			a.warnOnce("skip-load:"+loader.Provider.StateKey(),
				"agent: the service keeps the conversation, so history is not loaded from the provider; set SkipLoad on it, or store=false to load from it",
				"provider", loader.Provider.StateKey())
		}
	}
	if r.sentinel() {
		r.resendContext = !loader.StoreContextMessages
	}

	for _, cp := range a.cfg.ContextProviders {
		msgs, err := cp.Context(ctx, r.work, r.input)
		if err != nil {
			return nil, fmt.Errorf("agent: context provider %q: %w", cp.Name(), err)
		}
		for _, m := range msgs {
			m.Source = &abi.Source{Type: abi.SourceContextProvider, ID: cp.Name()}
			r.ctxMsgs = append(r.ctxMsgs, m)
		}
	}
	if r.mode.load == loadOnce && loader != nil {
		h, err := r.loadHistory(ctx)
		if err != nil {
			return nil, err
		}
		// What reaches the model must pair every call with its results,
		// even after a run that stopped between them.
		r.history = h
	}
	r.computed = map[string]abi.Content{}
	if err := r.resume(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// sentinel reports whether PersistPerServiceCall drives the loop with
// localConversationID, reloading history before every call.
func (r *run) sentinel() bool { return r.mode.load == loadEveryCall }

func (a *Agent) loaderConfig() *ProviderConfig {
	if a.loader < 0 {
		return nil
	}
	return &a.cfg.Providers[a.loader]
}

// conflict applies the conflict mode to a service that keeps the
// conversation while a provider loads history.
func (r *run) conflict() error {
	key := r.a.loaderConfig().Provider.StateKey()
	switch r.a.cfg.Conflict {
	case ConflictWarn:
		r.a.warnOnce("conflict:"+key,
			"agent: the service keeps the conversation while a provider also loads history; both will hold it",
			"provider", key)
	case ConflictClear:
		r.clearLoaders = true
	default:
		return fmt.Errorf("agent: run: %w: provider %q loads history; set SkipLoad on it, or choose ConflictWarn or ConflictClear",
			ErrHistoryConflict, key)
	}
	return nil
}

// loadHistory returns the loader's history, filtered, reduced and stamped.
func (r *run) loadHistory(ctx context.Context) ([]abi.Message, error) {
	pc := r.a.loaderConfig()
	h, err := pc.Provider.Provide(ctx, r.work, r.input)
	if err != nil {
		return nil, fmt.Errorf("agent: provide %q: %w", pc.Provider.StateKey(), err)
	}
	if pc.ProvideFilter != nil {
		h = pc.ProvideFilter(h)
	}
	if pc.Reducer != nil {
		if h, err = pc.Reducer.Reduce(ctx, h); err != nil {
			return nil, fmt.Errorf("agent: reduce %q: %w", pc.Provider.StateKey(), err)
		}
	}
	if h, err = r.compact(ctx, pc.Provider.StateKey(), h); err != nil {
		return nil, err
	}
	out := make([]abi.Message, len(h))
	// Each message's Source of its own, all made in one allocation.
	srcs := make([]abi.Source, len(h))
	for i, m := range h {
		srcs[i] = abi.Source{Type: abi.SourceChatHistory, ID: pc.Provider.StateKey()}
		m.Source = &srcs[i]
		out[i] = m
	}
	return out, nil
}

// compose builds the messages of one model call.
func (r *run) compose(convID string, produced, results []abi.Message) []abi.Message {
	var out []abi.Message
	switch {
	case convID == "":
		// Nothing keeps the conversation: send all of it, built in one
		// allocation.
		out = make([]abi.Message, 0, len(r.ctxMsgs)+len(r.history)+len(r.resumed)+len(r.input)+len(produced))
		out = append(out, r.ctxMsgs...)
		if r.sentinel() {
			// The middleware puts the history in and pairs it with the
			// input; stripping here would drop results the input brings
			// for a call stored earlier.
			out = append(out, r.resumed...)
			out = append(out, r.input...)
		} else {
			n := len(out)
			out = append(append(append(out, r.history...), r.resumed...), r.input...)
			out = reducer.AppendStripOrphans(out[:n], out[n:])
		}
		out = append(out, produced...)
	case r.calls == 0:
		// The service holds the calls left open: their outputs come
		// first, before anything else of the turn.
		out = append(out, r.resumed...)
		out = append(out, r.ctxMsgs...)
		out = append(out, r.input...)
	case convID == localConversationID:
		if r.resendContext {
			out = append(out, r.ctxMsgs...)
		}
		out = append(out, results...)
	default:
		out = append(out, results...)
	}
	return out
}

// execute runs the function-invocation loop.
func (r *run) execute(ctx context.Context) (res *RunResult, err error) {
	ctx = txn.With(context.WithValue(ctx, runKey{}, r), r.txn)
	// Whatever the plugins wrote since the last commit goes with a failed
	// run (after a commit the Txn is empty and this does nothing).
	defer r.rollback(ctx)
	res = &RunResult{Resumed: r.resumedCalls}
	// A stream shows the answers to the calls an earlier run left open
	// first, as they are sent first. A consumer that stops there stops
	// before any model call: nothing completed, nothing is committed, and
	// the calls stay open for the next run.
	if !r.emitMessages(r.resumed) {
		return res, nil
	}
	convID := r.work.ServiceSessionID
	var results []abi.Message
	r.pendingInputs = concat(r.ctxMsgs, r.input)
	for {
		req := model.Request{
			Instructions:   r.a.cfg.Instructions,
			Messages:       r.compose(convID, res.Messages, results),
			Tools:          r.a.specs,
			ConversationID: convID,
			Store:          r.store,
		}
		resp, err := r.call(ctx, req)
		if err != nil {
			return nil, r.commitFailure(ctx, &ModelError{Call: r.calls + 1, Err: err})
		}
		r.calls++
		res.Iterations = r.calls
		if resp == nil { // a streaming consumer stopped during the call
			break
		}
		res.Messages = append(res.Messages, resp.Messages...)
		addUsage(&res.Usage, resp.Usage)
		if !r.emitMessages(resp.Messages) {
			break
		}
		if id := resp.ConversationID; id != "" {
			convID = id
			if id != localConversationID {
				res.ConversationID = id
				if err := r.serviceConversation(); err != nil {
					return nil, err
				}
			}
		}
		calls := functionCalls(resp.Messages)
		if len(calls) == 0 || r.calls >= r.maxIter {
			// At the bound, calls still asked for stay unanswered; they
			// are removed before anything is stored.
			break
		}
		run, ask := r.a.splitApprovals(calls)
		if len(ask) > 0 {
			// A person decides on these calls before they run: the run
			// ends here, with the others' results recorded, and the next
			// run carries the decisions (approval.go).
			r.awaitApproval(ctx, res, run, ask)
			break
		}
		var terminate bool
		results, terminate = r.a.runTools(ctx, calls)
		if !r.keepResults(res, results) {
			break
		}
		if terminate {
			res.Terminated = true
			break
		}
		r.mu.Lock()
		r.pendingResults = results
		r.mu.Unlock()
	}
	if err := r.finish(ctx, res); err != nil {
		return nil, err
	}
	return res, nil
}

// rollback drops whatever the run's plugins wrote since the last commit
// (after a commit the Txn is empty and this does nothing).
func (r *run) rollback(ctx context.Context) {
	if err := r.txn.Rollback(ctx); err != nil {
		r.a.log.Warn("agent: rolling back the run's database work failed", "session", r.work.SessionID, "error", err)
	}
}

// serviceConversation handles a conversation id from the service when the
// loop, not the middleware, is in charge of persistence.
func (r *run) serviceConversation() error {
	if r.a.loader < 0 || r.clearLoaders || r.mode.perCallPersistence() {
		return nil
	}
	return r.conflict()
}

// keepResults records the results of the tools the run ran among its
// computed results, adds them to res and emits them; it reports whether
// the consumer wants more (emitMessages).
func (r *run) keepResults(res *RunResult, results []abi.Message) bool {
	r.mu.Lock()
	for _, m := range results {
		for _, c := range m.Contents {
			r.computed[c.CallID] = c
		}
	}
	r.mu.Unlock()
	res.Messages = append(res.Messages, results...)
	return r.emitMessages(results)
}

func (r *run) emitMessages(msgs []abi.Message) bool {
	if r.emit == nil {
		return true
	}
	for i := range msgs {
		m := msgs[i]
		if !r.emit(RunUpdate{Message: &m}) {
			r.stopped = true
			return false
		}
	}
	return true
}

// call makes one model call, streaming when the run streams. It returns a
// nil response when a streaming consumer stopped before the call ended.
func (r *run) call(ctx context.Context, req model.Request) (*model.Response, error) {
	if r.emit == nil {
		return r.a.client.Complete(ctx, req)
	}
	var agg aggregator
	for u, err := range r.a.client.Stream(ctx, req) {
		if err != nil {
			return nil, err
		}
		agg.add(u)
		if u.ConversationID == localConversationID {
			u.ConversationID = ""
			if len(u.Contents) == 0 && u.Usage == nil && u.FinishReason == "" {
				continue
			}
		}
		if !r.emit(RunUpdate{Model: &u}) {
			r.stopped = true
			return nil, nil
		}
	}
	return agg.response(), nil
}

// finish persists at the end of the run, as the mode requires.
func (r *run) finish(ctx context.Context, res *RunResult) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reply, r.finished = res.Messages, true
	if r.mode.perCallPersistence() {
		// Each call was committed as it succeeded. Results of calls the
		// last one left open (a tool ended the loop, a consumer stopped)
		// were sent to no model: they are kept as pending results, for
		// the next run to send. A stack used as is without the middleware
		// still gets the service's id recorded.
		changed := r.mode.store == storeEveryCall && r.recordComputed()
		if r.mode.store == storeNever && len(r.work.PendingToolCalls) > 0 && r.calls > 0 {
			r.work.PendingToolCalls = nil
			changed = true
		}
		if res.ConversationID != "" && res.ConversationID != r.work.ServiceSessionID {
			r.work.ServiceSessionID = res.ConversationID
			changed = true
			if r.mode.store == storeNever {
				// Without the middleware nothing recorded the calls of
				// the response the session now continues from; those the
				// loop left unsent must be answered by the next run.
				r.work.PendingToolCalls = trailingCalls(res.Messages)
			}
		}
		if r.awaiting {
			// The requests are recorded (by the last call's commit, or
			// here when nothing persists per call), and the run's record
			// says it finished: it waits for a person, not for a retry.
			if r.mode.store == storeNever {
				r.work.PendingToolCalls = r.a.markApprovals(trailingCalls(res.Messages))
			}
			changed = true
		}
		// What plugins wrote since the last commit (provide before the
		// first call, or before a call a streaming consumer abandoned)
		// belongs to a run that succeeded: it commits.
		if changed || len(r.txn.Targets()) > 0 {
			return r.commit(ctx)
		}
		return nil
	}
	// Per-run storage keeps the trailing tool results of a terminated
	// loop: with them the stored history replays as call/result pairs.
	// Calls left unanswered (a consumer that stopped, the iteration bound)
	// are removed.
	produced := reducer.StripOrphanCalls(res.Messages)
	// Open calls an earlier run left were answered (or dropped, when
	// nothing held them any more).
	var open []session.PendingToolCall
	if res.ConversationID != "" || r.awaiting {
		// Unless the service keeps the conversation: it keeps the last
		// response as it was, and refuses to continue from it until each
		// of its calls is answered. Those calls stay open, with what their
		// tools returned, for the next run to send; that run stores the
		// results, after the calls stored here, as per-service-call
		// persistence does. Stored now too, they would be stored twice.
		// Calls that need a person's approval stay open the same way,
		// whoever keeps the conversation: the next run sends their
		// answers, with the decisions it carries.
		if open = r.a.markApprovals(trailingCalls(res.Messages)); len(open) > 0 {
			last := lastResponse(res.Messages)
			produced = concat(reducer.StripOrphanCalls(res.Messages[:last]), res.Messages[last:last+1])
		}
	}
	for _, pc := range r.a.cfg.Providers {
		if r.clearLoaders && !pc.SkipLoad {
			continue
		}
		if err := r.storeInto(ctx, pc, r.resumed, r.pendingInputsAll(), nil, produced); err != nil {
			return err
		}
	}
	r.work.PendingToolCalls = open
	if res.ConversationID != "" {
		r.work.ServiceSessionID = res.ConversationID
	}
	r.learn = learnable(r.resumed, r.input, produced)
	return r.commit(ctx)
}

func (r *run) pendingInputsAll() []abi.Message { return concat(r.ctxMsgs, r.input) }

// storeInto stores one batch into one provider, applying its flags.
// resumed are the answers to calls an earlier run left open: they pair with
// the stored calls, so they come first.
func (r *run) storeInto(ctx context.Context, pc ProviderConfig, resumed, inputs, results, response []abi.Message) error {
	var req, resp []abi.Message
	if !pc.SkipStoreOutputs {
		req = append(req, resumed...)
	}
	if !pc.SkipStoreInputs {
		var in []abi.Message
		for _, m := range inputs {
			if m.Source != nil && (m.Source.Type == abi.SourceChatHistory ||
				(m.Source.Type == abi.SourceContextProvider && !pc.StoreContextMessages)) {
				continue
			}
			in = append(in, m)
		}
		if pc.StoreInputFilter != nil && len(in) > 0 {
			in = pc.StoreInputFilter(in)
		}
		req = append(req, in...)
	}
	if !pc.SkipStoreOutputs {
		req = append(req, results...)
		resp = response
	}
	if len(req) == 0 && len(resp) == 0 {
		return nil
	}
	if err := pc.Provider.Store(ctx, r.work, req, resp); err != nil {
		return fmt.Errorf("agent: store %q: %w", pc.Provider.StateKey(), err)
	}
	return nil
}

// commit hands a copy of the working session, one revision on, to the
// Saver and then to the caller. r.mu must be held.
func (r *run) commit(ctx context.Context) error {
	if r.work.Revision >= session.MaxRevision {
		r.txn.Rollback(ctx)
		return fmt.Errorf("agent: commit session %q at revision %d: %w", r.work.SessionID, r.work.Revision, session.ErrRevisionExhausted)
	}
	rc, err := r.afterRun(ctx)
	if err != nil {
		r.txn.Rollback(ctx)
		return err
	}
	next := snapshot(r.work)
	next.Revision++
	txn.MarkHeld(next, r.txn.Targets())
	if err := r.recordRun(next); err != nil {
		return err
	}
	if err := r.saveSession(ctx, snapshot(next)); err != nil {
		r.txn.Rollback(ctx)
		return fmt.Errorf("agent: commit session %q: %w", next.SessionID, err)
	}
	r.work.Revision, r.work.Provenance = next.Revision, next.Provenance
	*r.target = *next
	if rc != nil {
		for _, f := range rc.onCommit {
			f()
		}
	}
	return nil
}

// snapshot copies a session for the run to work on, or to hand out. The
// state bytes are shared: nothing writes into bytes a session holds (package
// session's value semantics), so copying them, O(history) on every run and
// commit, would buy nothing. The map is copied so that a provider that sets
// a slot in place rather than with Session.SetState still cannot reach the
// caller's session before the commit.
func snapshot(s *session.Session) *session.Session {
	c := *s
	c.State = maps.Clone(s.State)
	return &c
}

func functionCalls(msgs []abi.Message) []abi.Content {
	var calls []abi.Content
	for _, m := range msgs {
		for _, c := range m.Contents {
			if c.Type == abi.ContentFunctionCall {
				calls = append(calls, c)
			}
		}
	}
	return calls
}

func addUsage(sum *abi.Usage, u *abi.Usage) {
	if u == nil {
		return
	}
	sum.InputTokens += u.InputTokens
	sum.OutputTokens += u.OutputTokens
	sum.TotalTokens += u.TotalTokens
}

func concat(parts ...[]abi.Message) []abi.Message {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return nil
	}
	out := make([]abi.Message, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
