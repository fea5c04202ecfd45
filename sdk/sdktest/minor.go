package sdktest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wasmhist/wasmhist/abi"
)

// A plugin is judged by the rules of the ABI minor it declares in describe
// (PluginInfo.ABI). Every case and every rule (a Reason) carries the minor
// that introduced it. A case or rule of a later minor than the plugin's
// still runs, but what it finds is Advice, never a Failure: a new minor
// never turns a behaviour that conformed at an older minor into a failure
// for plugins of that minor (abi/SPEC.md sections 3 and 10).

// reasonSince is the ABI minor that introduced each rule. A reason not in
// the map is of minor 0; TestEveryRuleNamesItsMinor keeps every documented
// reason in it.
var reasonSince = map[Reason]int{
	ReasonLoadFailed:            0,
	ReasonCallFailed:            0,
	ReasonWrongHistory:          0,
	ReasonDescribeInvalid:       0,
	ReasonABIMajor:              0,
	ReasonInitialStateRejected:  0,
	ReasonReencodedStateDiffers: 0,
	ReasonKeysMixed:             0,
	ReasonUnknownFieldsDropped:  0,
	ReasonUnknownFieldsRejected: 0,
	ReasonInstanceDependent:     0,
	ReasonMalformedAccepted:     0,
	ReasonListIncomplete:        0,
	ReasonPageOverLimit:         0,
	ReasonCursorStuck:           0,
	ReasonPagingUnbounded:       0,
	ReasonHistoryAfterClear:     0,
	ReasonListAfterClear:        0,
	// From 1.1 the host serves pages by reference itself and answers a
	// cursor past the end with an empty last page; a plugin of 1.1 or
	// later that pages by value answers alike (SPEC section 4.4). A 1.0
	// plugin may refuse such a cursor with invalid_argument.
	ReasonStaleCursor:          1,
	ReasonMigrateFailed:        0,
	ReasonMigratedHistoryWrong: 0,
	ReasonBadOlderState:        0,
	// A plugin that caches rows or commits itself breaks the 1.0 rules
	// that it keeps nothing between calls and that a failed call or run
	// did not happen (SPEC sections 1 and 8).
	ReasonRolledBackKept:  0,
	ReasonRetryDuplicated: 0,
	// Of the cases ABI 1.2 added: a store killed mid-call leaves the
	// history as it was; a history stored as an importer stores it, and
	// stores that split a tool call from its result, are kept as given
	// (SPEC sections 4.3 and 8.2).
	ReasonCrashLost:        2,
	ReasonCrashHalfWritten: 2,
	ReasonImportRefused:    2,
	ReasonImportDiffers:    2,
	ReasonSplitPairRefused: 2,
	ReasonSplitPairAltered: 2,
}

// Since is the ABI minor that introduced the rule the reason reports.
func (r Reason) Since() int { return reasonSince[r] }

// Advice is what a case found against a rule of a later ABI minor than
// the plugin declares: not a failure, but what the plugin must change
// before it declares that minor.
type Advice struct {
	Case   string
	Reason Reason
	// Since is the minor of the rule; Declared the minor the plugin
	// declares.
	Since, Declared int
	Err             error
}

func (a *Advice) Error() string {
	return fmt.Sprintf("would fail rule %s of %d.%d (this plugin declares %d.%d): %v", a.Reason, abi.Major, a.Since, abi.Major, a.Declared, a.Err)
}

func (a *Advice) Unwrap() error { return a.Err }

// Verdict is the outcome of one case for one plugin: Err is nil (the case
// passed), a *Skipped or a *Failure, as Case.Run returns; Advice lists
// what the case found against rules of later minors than the plugin's.
type Verdict struct {
	Err    error
	Advice []*Advice
	// Declared is the ABI version the plugin declared in describe, "" when
	// the case made no subject or the version did not parse (the plugin is
	// then judged by every rule).
	Declared string
}

// Judge runs the case against subjects from f and returns its verdict,
// advice included. Case.Run is Judge without the advice.
func (c Case) Judge(ctx context.Context, f Factory) Verdict {
	j := &judge{declared: -1}
	err := c.Run(context.WithValue(ctx, judgeKey{}, j), f)
	j.mu.Lock()
	defer j.mu.Unlock()
	v := Verdict{Err: err, Advice: j.advice}
	if j.declared >= 0 {
		v.Declared = j.version
	}
	return v
}

// judge collects a case's advice and knows the minor the plugin declares.
type judge struct {
	mu       sync.Mutex
	declared int // -1 until a subject says
	version  string
	caseName string
	since    int
	advice   []*Advice
}

type judgeKey struct{}

// judgeOf is the case's judge; a Case.Run outside Judge gets one of its own.
func judgeOf(ctx context.Context) *judge {
	if j, ok := ctx.Value(judgeKey{}).(*judge); ok {
		return j
	}
	return nil
}

// declare records the minor a subject declares, the first time.
func (j *judge) declare(s Subject) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.declared >= 0 {
		return
	}
	major, minor, err := abi.ParseVersion(s.Info().ABI)
	if err != nil || major != abi.Major {
		return
	}
	j.declared, j.version = minor, s.Info().ABI
}

// advise turns a finding against a rule of a later minor than the plugin's
// into advice and reports whether it did; a finding of the plugin's own
// rules is left to fail the case.
func (j *judge) advise(reason Reason, err error) bool {
	if j == nil {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	since := max(reason.Since(), j.since)
	if j.declared < 0 || since <= j.declared {
		return false
	}
	j.advice = append(j.advice, &Advice{Case: j.caseName, Reason: reason, Since: since, Declared: j.declared, Err: err})
	return true
}

// rule checks err against the rule reason names: nil stays nil; a finding
// of a later minor than the plugin's becomes advice, and the case goes on;
// anything else is the case's failure, tagged with the reason.
func rule(ctx context.Context, reason Reason, err error) error {
	if err == nil {
		return nil
	}
	if judgeOf(ctx).advise(reason, err) {
		return nil
	}
	return because(reason, err)
}

// judged is result with the case's minor: a failure of a rule, or in a
// case, of a later minor than the plugin's is advice, and the case passes.
func judged(ctx context.Context, name string, err error) error {
	err = result(name, err)
	var f *Failure
	if errors.As(err, &f) && judgeOf(ctx).advise(f.Reason, f.Err) {
		return nil
	}
	return err
}
