package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/reducer"
)

// Errors of the agent loop, for errors.Is.
var (
	// ErrConfig reports a Config that New refuses.
	ErrConfig = errors.New("agent: invalid configuration")
	// ErrHistoryConflict reports a service that keeps the conversation
	// (it returned a conversation id) while a provider that loads history is
	// configured too, under ConflictThrow; or, with per-service-call
	// persistence, a session continuing a service conversation while the run
	// asks the service not to store.
	ErrHistoryConflict = errors.New("agent: service-managed history conflicts with a history provider")
)

// DefaultMaxIterations bounds the model calls of one run when
// Config.MaxIterations is zero.
const DefaultMaxIterations = 40

// ConflictMode says what a run does when the model service keeps the
// conversation itself (returns a conversation id) while a provider that
// loads history is configured: both would hold the history and they would
// drift apart.
type ConflictMode int

const (
	// ConflictThrow fails the run with ErrHistoryConflict. The default.
	ConflictThrow ConflictMode = iota
	// ConflictWarn logs a warning (once per provider) and goes on storing
	// into the providers; the session records the service's id, so later
	// runs continue the service conversation and skip loading.
	ConflictWarn
	// ConflictClear lets the service own the history: providers that load
	// do not store this run (per-run persistence) and later runs skip
	// loading. Store-only (audit) providers are not affected.
	ConflictClear
)

// Config configures an Agent. The zero value of every field but Model
// is valid; see the Agent documentation for the persistence semantics.
type Config struct {
	// Model is the model service. Unless UseClientAsIs is set, the agent
	// wraps it with PersistPerServiceCall when per-service-call persistence
	// is required.
	Model model.Client
	// Instructions, when set, is sent on every model call as
	// model.Request.Instructions: the Responses API's instructions
	// parameter, a leading system message for Chat Completions and the
	// offline model. It is never stored.
	Instructions string
	// Tools the model may call.
	Tools []Tool
	// Providers are the history providers. At most one may load history.
	Providers []ProviderConfig
	// ContextProviders add messages to each run (memories, retrieved
	// documents). Their messages are sent after the instructions and before
	// the history, and are stored only by providers with
	// StoreContextMessages.
	ContextProviders []ContextProvider
	// MaxIterations bounds the model calls of one run (0: DefaultMaxIterations).
	MaxIterations int
	// MaxParallelTools bounds the tool calls of one model response that
	// run at once (0: DefaultMaxParallelTools; 1: one after the other).
	// Results keep call order whatever the bound.
	MaxParallelTools int
	// Store is the default of the service's store option; a run may
	// override it with RunOptions.Store. Nil leaves it unset, and an unset store
	// is never sent to the service.
	Store *bool
	// RequirePerServiceCallPersistence persists after every successful
	// model call instead of once after the run.
	RequirePerServiceCallPersistence bool
	// UseClientAsIs uses Model exactly as given. Per-service-call
	// persistence is then the caller's job: add PersistPerServiceCall to
	// the stack (the agent warns when it is missing).
	UseClientAsIs bool
	// Conflict says what to do when the service keeps the conversation
	// while a provider loads history (default ConflictThrow).
	Conflict ConflictMode
	// Saver, when set, is given every session the agent commits, before
	// the caller's *session.Session is updated; an error fails the commit and
	// leaves the caller's session as it was. With per-service-call
	// persistence it runs after every model call.
	Saver store.Saver
	// Logger receives warnings (default slog.Default()).
	Logger *slog.Logger
	// Compaction, when its MaxTokens is set, summarises the oldest part of
	// the loaded history once it exceeds that budget, keeping the stored
	// messages as they are (see Compaction).
	Compaction Compaction
}

// ProviderConfig attaches a HistoryProvider to an agent. The zero value of
// the flags is the common case, a provider that loads history and stores
// the run's inputs and outputs, so the flags are named for the exceptions:
// SkipLoad, SkipStoreInputs and SkipStoreOutputs are the negations of the
// reference's load_messages, store_inputs and store_outputs (all true by
// default), and StoreContextMessages (false by default) keeps its name.
// Audit returns the configuration of a store-only audit copy.
type ProviderConfig struct {
	Provider HistoryProvider
	// SkipLoad: the provider only stores (load_messages=false).
	SkipLoad bool
	// SkipStoreInputs: the caller's messages are not stored (store_inputs=false).
	SkipStoreInputs bool
	// SkipStoreOutputs: the model's messages and tool results are not
	// stored (store_outputs=false).
	SkipStoreOutputs bool
	// StoreContextMessages also stores the messages context providers
	// added (store_context_messages=true).
	StoreContextMessages bool
	// ProvideFilter, when set, filters the loaded history before it is
	// stamped and reduced.
	ProvideFilter func([]abi.Message) []abi.Message
	// StoreInputFilter, when set, filters the request messages to store,
	// after the default exclusions (chat history; context messages unless
	// StoreContextMessages).
	StoreInputFilter func([]abi.Message) []abi.Message
	// Reducer, when set, bounds the loaded history (after ProvideFilter).
	Reducer reducer.Reducer
}

// Audit returns the configuration of a store-only provider that also keeps
// context-provider messages: a copy of everything the model saw and said,
// without affecting what is loaded.
func Audit(p HistoryProvider) ProviderConfig {
	return ProviderConfig{Provider: p, SkipLoad: true, StoreContextMessages: true}
}

// ContextProvider adds messages to a run, such as remembered facts or
// retrieved documents. The agent stamps them as context-provider sourced.
type ContextProvider interface {
	// Name identifies the provider in message sources.
	Name() string
	// Context returns messages for this run; request is the caller's input.
	Context(ctx context.Context, s *session.Session, request []abi.Message) ([]abi.Message, error)
}

// RunOptions change one run. A nil *RunOptions, like the zero value,
// keeps the agent's configuration.
type RunOptions struct {
	// Store, when set, is the service's store option for this run,
	// overriding Config.Store.
	Store *bool
	// MaxIterations, when positive, bounds the model calls of this run
	// instead of Config.MaxIterations.
	MaxIterations int
	// RunID, when set, identifies the run to the caller, who keeps it
	// when repeating a run whose outcome it does not know (the process
	// died, a connection broke after the commit). Each commit records it
	// in the session with a digest of the input and what the run returned
	// (Session.RecentRuns, the last session.MaxRecentRuns ids). A run whose
	// RunID and input the session recorded was committed: Run returns its
	// reply again at once (RunResult.Replayed) and changes nothing; the
	// same RunID with another input is refused with ErrRunIDReused. A run
	// that stopped before it finished (per service call, a model call
	// failed after an earlier one committed) and whose commit is still the
	// session's revision goes on instead: it answers the tool calls it left
	// open and calls the model, without storing its input again, and
	// returns all it returned. Up to 256 bytes; a fresh random id per user
	// turn is the usual choice.
	RunID string
	// AcceptNewBuild lets the run resume slots that another build of their
	// plugin wrote (another version or sha256; see ErrProviderMismatch):
	// the plugin's migrate_state runs where the state version changed, and
	// the commit records the new build. A different plugin or storage is
	// still refused.
	AcceptNewBuild bool
	// Decisions answer the tool calls an earlier run left awaiting a
	// person's approval (PendingApprovals), one each: a run on a session
	// with such calls and no decision for one of them is refused with
	// ErrApprovalRequired. Approved calls run before the model is called;
	// denied ones are answered with an error the model reads.
	Decisions []Decision
}

// RunResult is the outcome of a run.
type RunResult struct {
	// Messages are what the run produced, in order: assistant messages and
	// tool result messages, as produced (before any sanitizing for storage).
	Messages []abi.Message
	// ConversationID is the service's conversation id, if it keeps one.
	ConversationID string
	// Terminated is true when a tool ended the loop; the run's last
	// messages are then tool results no model has seen.
	Terminated bool
	// Iterations counts the model calls.
	Iterations int
	// Usage sums the usage the service reported.
	Usage abi.Usage
	// Resumed lists the tool calls an earlier run left open
	// (session.Session.PendingToolCalls) that this run answered before its
	// input, and how.
	Resumed []ResumedCall
	// Replayed reports a run whose RunOptions.RunID and input the session
	// recorded: an earlier attempt committed it, this one ran nothing, and
	// Messages are what the earlier one returned (empty if its reply was
	// dropped from the window, see session.MaxRecentReplyBytes). The other
	// fields are zero.
	Replayed bool
	// ApprovalRequests are the calls the run ended on because their tools
	// need a person's approval (Tool.NeedsApproval); the session records
	// them. Answer them with RunOptions.Decisions on the next run.
	ApprovalRequests []ApprovalRequest
}

// Text returns the text of the last assistant message.
func (r *RunResult) Text() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == abi.RoleAssistant {
			if t := r.Messages[i].TextContent(); t != "" {
				return t
			}
		}
	}
	return ""
}

// Agent runs a model with tools over sessions, loading and storing history
// through providers.
//
// # Persistence
//
// By default persistence is per run and atomic: the run works on a clone
// of the session and, only when it succeeds, every provider stores the
// run's request messages (without those loaded from history, and without
// context-provider messages unless StoreContextMessages) plus every message
// the run produced, including the tool results of a loop a tool
// terminated (unless the service keeps the conversation: then those
// results answer calls the session keeps open, and the next run stores
// them as it sends them). Then the clone replaces the caller's session,
// with Revision one higher. A failing run changes nothing, in the session
// or in the databases its plugins wrote, provide included.
//
// With RequirePerServiceCallPersistence, the agent wraps the model client
// with PersistPerServiceCall: after each successful model call, the
// providers store that call's new request messages (the caller's input on
// the first call, the tool results being sent on later ones) and its
// response, and the session is committed. Calls that succeeded stay
// stored when a later one fails; tool results no model was sent (a
// terminated loop) are never stored. When the service does not keep the
// conversation, the middleware loads history before every call and hands
// the loop a local sentinel conversation id, so the loop sends only new
// messages, as it would to a service that keeps the conversation; the
// sentinel never reaches the model.
//
// See persistence.md in this directory for the full configuration matrix.
//
// An Agent is safe for concurrent use by runs over different sessions; a
// session must not be used by two runs at once.
type Agent struct {
	cfg         Config
	client      model.Client // Model, wrapped as the configuration requires
	loader      int          // index in cfg.Providers of the loader, or -1
	maxParallel int          // tool calls of one response run at once
	tools       map[string]*compiledTool
	specs       []model.ToolSpec
	log         *slog.Logger
	warnedMu    sync.Mutex
	warned      map[string]bool
	fault       func(txn.Step) error // commit fault injector, set by tests (export_test.go)
}

// New validates cfg and returns an agent. Configuration errors wrap
// ErrConfig.
func New(cfg Config) (*Agent, error) {
	a := &Agent{cfg: cfg, loader: -1, log: cfg.Logger, warned: map[string]bool{}}
	if a.log == nil {
		a.log = slog.Default()
	}
	if cfg.Model == nil {
		return nil, fmt.Errorf("%w: no model client", ErrConfig)
	}
	if cfg.MaxIterations < 0 {
		return nil, fmt.Errorf("%w: negative MaxIterations", ErrConfig)
	}
	if cfg.MaxParallelTools < 0 {
		return nil, fmt.Errorf("%w: negative MaxParallelTools", ErrConfig)
	}
	a.maxParallel = cfg.MaxParallelTools
	if a.maxParallel == 0 {
		a.maxParallel = DefaultMaxParallelTools
	}
	if cfg.Conflict < ConflictThrow || cfg.Conflict > ConflictClear {
		// An unknown mode matches none of the conflict rows of the mode
		// table, so a continued session would load history as if there
		// were no conflict.
		return nil, fmt.Errorf("%w: unknown ConflictMode %d", ErrConfig, cfg.Conflict)
	}
	keys := map[string]bool{}
	for i, p := range cfg.Providers {
		if p.Provider == nil {
			return nil, fmt.Errorf("%w: provider %d is nil", ErrConfig, i)
		}
		k := p.Provider.StateKey()
		if k == "" {
			return nil, fmt.Errorf("%w: provider %d has an empty state key", ErrConfig, i)
		}
		if keys[k] {
			return nil, fmt.Errorf("%w: two providers share state key %q; give each its own", ErrConfig, k)
		}
		keys[k] = true
		if !p.SkipLoad {
			if a.loader >= 0 {
				return nil, fmt.Errorf("%w: providers %q and %q both load history; set SkipLoad on all but one",
					ErrConfig, cfg.Providers[a.loader].Provider.StateKey(), k)
			}
			a.loader = i
		}
	}
	names := map[string]bool{}
	for _, cp := range cfg.ContextProviders {
		if cp == nil {
			return nil, fmt.Errorf("%w: nil context provider", ErrConfig)
		}
		if names[cp.Name()] {
			return nil, fmt.Errorf("%w: two context providers named %q", ErrConfig, cp.Name())
		}
		names[cp.Name()] = true
	}
	if cfg.Compaction.MaxTokens < 0 || cfg.Compaction.KeepTokens < 0 {
		return nil, fmt.Errorf("%w: negative Compaction budget", ErrConfig)
	}
	var err error
	if a.tools, a.specs, err = compileTools(cfg.Tools); err != nil {
		return nil, err
	}

	a.client = cfg.Model
	switch {
	case cfg.UseClientAsIs && cfg.RequirePerServiceCallPersistence && !hasPersistence(cfg.Model):
		a.log.Warn("agent: per-service-call persistence is required but the model client is used as is and has no PersistPerServiceCall middleware; the agent will not persist per call nor at the end of the run",
			"client", fmt.Sprintf("%T", cfg.Model))
	case !cfg.UseClientAsIs && cfg.RequirePerServiceCallPersistence && !hasPersistence(cfg.Model):
		a.client = PersistPerServiceCall(cfg.Model)
	}
	return a, nil
}

// Run runs the agent over session s with the caller's input messages and
// returns when the loop ends. On success s has been committed (see the
// Agent documentation); on failure s holds only what per-service-call
// persistence committed before the failure.
func (a *Agent) Run(ctx context.Context, s *session.Session, input []abi.Message, opts *RunOptions) (*RunResult, error) {
	rep, err := lookupRun(s, input, opts)
	switch {
	case err != nil:
		return nil, err
	case rep != nil && rep.replay != nil:
		return rep.replay, nil
	case rep != nil:
		input = nil // the run continues: its input is stored already
	}
	r, err := a.newRun(ctx, s, input, opts, nil)
	if err != nil {
		return nil, err
	}
	r.continues(rep)
	res, err := r.execute(ctx)
	if err != nil {
		return nil, err
	}
	if rep != nil {
		res.Messages = concat(rep.prior, res.Messages)
	}
	return res, nil
}

// warnOnce logs msg the first time key is seen by this agent, so that a
// long-lived agent does not repeat the same warning every turn.
func (a *Agent) warnOnce(key, msg string, args ...any) {
	a.warnedMu.Lock()
	seen := a.warned[key]
	a.warned[key] = true
	a.warnedMu.Unlock()
	if !seen {
		a.log.Warn(msg, args...)
	}
}
