package agent

import (
	"fmt"
	"strings"
)

// mode is how one run persists: who loads history and when, who stores and
// when. It is an index into modes, computed once when the run starts.
type mode int

const (
	modeRejectLocalContinuation mode = iota
	modeRejectConflict
	modeSharedHistory
	modeServiceHistory
	modePerRun
	modePerCallService
	modePerCallSentinel
	modePerCallResend
	modeCallerService
	modeCallerLocal
)

// cond is one condition of a mode row on one fact of the run.
type cond int8

const (
	anyValue cond = iota
	yes
	no
)

func (c cond) holds(v bool) bool { return c == anyValue || (c == yes) == v }

// anyConflict in a row's conflict matches every ConflictMode.
const anyConflict ConflictMode = -1

// loadWhen says when the loader's history is read.
type loadWhen int8

const (
	loadNever     loadWhen = iota
	loadOnce               // by the loop, before the first model call
	loadEveryCall          // by PersistPerServiceCall, before every model call
)

// storeWhen says when providers store and the session is committed.
type storeWhen int8

const (
	storeAtEnd          storeWhen = iota // every provider, once the run succeeded
	storeAtEndStoreOnly                  // store-only providers, once the run succeeded
	storeEveryCall                       // every provider, after every successful model call
	storeNever                           // no provider; only a new service id is committed
)

// facts are what decides the mode of a run.
type facts struct {
	perCall    bool // Config.RequirePerServiceCallPersistence
	middleware bool // the client stack (after New) contains PersistPerServiceCall
	keeps      bool // the service is expected to keep the conversation
	continues  bool // the session already continues a service conversation
	loader     bool // a provider loads history
	replayable bool // the loader stores all inputs and outputs, unfiltered
	conflict   ConflictMode
}

// modeRow is one row of the mode table: the facts that select it and what
// the run then does.
type modeRow struct {
	mode mode
	name string

	perCall, middleware, keeps, continues, loader, replayable cond
	conflict                                                  ConflictMode

	err   error // the run is refused with it, before any model call
	load  loadWhen
	store storeWhen
	// note completes the behaviour for the documentation.
	note string
}

// modes is the table of persistence modes. A run takes the first row whose
// conditions hold. persistence.md's configuration table is generated from
// it (TestPersistenceDocMatchesModes), and the matrix test runs every
// consistent combination of facts through it.
var modes = []modeRow{
	{
		mode: modeRejectLocalContinuation, name: "refused: local continuation",
		perCall: yes, keeps: no, continues: yes, conflict: anyConflict,
		err:  ErrHistoryConflict,
		note: "A local conversation cannot continue one the service holds.",
	},
	{
		mode: modeRejectConflict, name: "refused: conflict",
		perCall: no, continues: yes, loader: yes, conflict: ConflictThrow,
		err:  ErrHistoryConflict,
		note: "Set SkipLoad on the loader, or choose ConflictWarn or ConflictClear.",
	},
	{
		mode: modeSharedHistory, name: "per run, shared history",
		perCall: no, continues: yes, loader: yes, conflict: ConflictWarn,
		load: loadNever, store: storeAtEnd,
		note: "One warning per provider: the service and the providers both hold the history.",
	},
	{
		mode: modeServiceHistory, name: "per run, service history",
		perCall: no, continues: yes, loader: yes, conflict: ConflictClear,
		load: loadNever, store: storeAtEndStoreOnly,
		note: "The service owns the history; the loader stores nothing.",
	},
	{
		mode: modePerRun, name: "per run",
		perCall: no, conflict: anyConflict,
		load: loadOnce, store: storeAtEnd,
		note: "The default, atomic. A service id returned while a provider loads: Config.Conflict decides (throw fails the run, warn goes on, clear stops the loader storing).",
	},
	{
		mode: modePerCallService, name: "per call, service conversation",
		perCall: yes, middleware: yes, keeps: yes, conflict: anyConflict,
		load: loadNever, store: storeEveryCall,
		note: "The real conversation id flows through and is recorded after each call; a loader gets one warning per agent.",
	},
	{
		mode: modePerCallSentinel, name: "per call, sentinel",
		perCall: yes, middleware: yes, keeps: no, loader: yes, replayable: yes, conflict: anyConflict,
		load: loadEveryCall, store: storeEveryCall,
		note: "The loop sends only new messages under the local sentinel id, which never reaches the model; a service that returns an id anyway: Config.Conflict decides, then history stops being reloaded.",
	},
	{
		mode: modePerCallResend, name: "per call, resend",
		perCall: yes, middleware: yes, keeps: no, conflict: anyConflict,
		load: loadOnce, store: storeEveryCall,
		note: "No sentinel (no loader, or one that skips or filters what it stores): the loop sends the whole conversation each call.",
	},
	{
		mode: modeCallerService, name: "caller's job, service conversation",
		perCall: yes, middleware: no, keeps: yes, conflict: anyConflict,
		load: loadNever, store: storeNever,
		note: "UseClientAsIs with no PersistPerServiceCall in the stack (New warns); a loader gets one warning per agent.",
	},
	{
		mode: modeCallerLocal, name: "caller's job",
		perCall: yes, middleware: no, keeps: no, conflict: anyConflict,
		load: loadOnce, store: storeNever,
		note: "UseClientAsIs with no PersistPerServiceCall in the stack (New warns).",
	},
}

func (r *modeRow) matches(f facts) bool {
	return r.perCall.holds(f.perCall) && r.middleware.holds(f.middleware) &&
		r.keeps.holds(f.keeps) && r.continues.holds(f.continues) &&
		r.loader.holds(f.loader) && r.replayable.holds(f.replayable) &&
		(r.conflict == anyConflict || r.conflict == f.conflict)
}

// resolveMode returns the first row of modes whose conditions hold.
func resolveMode(f facts) *modeRow {
	for i := range modes {
		if modes[i].matches(f) {
			return &modes[i]
		}
	}
	// The last rows match every combination of their perCall value.
	panic(fmt.Sprintf("agent: no persistence mode for %+v", f))
}

// perCallPersistence reports whether the run asked for persistence after
// every model call: PersistPerServiceCall acts only then.
func (r *modeRow) perCallPersistence() bool { return r.perCall == yes }

// serviceKeeps reports whether the service is expected to keep the
// conversation, in the modes where that decides anything (per call).
func (r *modeRow) serviceKeeps() bool { return r.keeps == yes }

// modesMarkdown renders modes as the configuration table of persistence.md.
func modesMarkdown() string {
	var b strings.Builder
	b.WriteString("| mode | `RequirePerServiceCallPersistence` | `PersistPerServiceCall` in the stack | service keeps the conversation | session has a `ServiceSessionID` | a provider loads | the loader stores everything, unfiltered | `Conflict` | history loads | providers store | a failed run leaves |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range modes {
		fmt.Fprintf(&b, "| **%s** | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.name, r.perCall, r.middleware, r.keeps, r.continues, r.loader, r.replayable,
			conflictCell(r.conflict), r.loadCell(), r.storeCell(), r.failureCell()+" "+r.note)
	}
	return b.String()
}

func (c cond) String() string {
	switch c {
	case yes:
		return "yes"
	case no:
		return "no"
	}
	return "any"
}

func conflictCell(c ConflictMode) string {
	switch c {
	case anyConflict:
		return "any"
	case ConflictThrow:
		return "`ConflictThrow`"
	case ConflictWarn:
		return "`ConflictWarn`"
	case ConflictClear:
		return "`ConflictClear`"
	}
	return fmt.Sprint(int(c))
}

func (r *modeRow) loadCell() string {
	if r.err != nil {
		return "—"
	}
	switch r.load {
	case loadOnce:
		return "once, before the first call"
	case loadEveryCall:
		return "before every call"
	}
	return "never"
}

func (r *modeRow) storeCell() string {
	if r.err != nil {
		return "—"
	}
	switch r.store {
	case storeAtEnd:
		return "all, once, after the run succeeded"
	case storeAtEndStoreOnly:
		return "store-only ones, once, after the run succeeded"
	case storeEveryCall:
		return "all, after every successful call, each a commit"
	}
	return "none; a new service id is committed at the end"
}

func (r *modeRow) failureCell() string {
	if r.err != nil {
		return "`ErrHistoryConflict` before any call; the session unchanged."
	}
	if r.store == storeEveryCall {
		return "The calls that succeeded, stored and committed."
	}
	return "The session unchanged."
}
