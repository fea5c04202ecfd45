package sdktest

import (
	"context"
	"testing"
)

// Case is one conformance check. Run drives only the Subject interface, on
// Subjects it gets from the factory, and returns nil when the provider
// passes, a *Skipped when the case does not apply (an optional export the
// provider does not implement), or a *Failure that names the case, gives
// one of its Reasons and says what the provider did wrong. It needs no
// testing.T, so a command-line tool can run the suite against any plugin
// binary.
type Case struct {
	// Name identifies the case, e.g. "provide_returns_stored_in_order".
	Name string
	// Doc says in one sentence what a conforming provider does.
	Doc string
	// Reasons are the Failure reasons the case reports, besides
	// load_failed and call_failed, which any case may.
	Reasons []Reason
	// Since is the ABI minor that introduced the case. A plugin that
	// declares an older minor gets advice from it, never a failure (see
	// Judge).
	Since int
	Run   func(ctx context.Context, f Factory) error
}

// Cases returns the conformance suite, in the order it runs, with no
// Options: the migrate_state case is skipped.
//
// The suite expects a subject whose provide returns everything stored for a
// key when it holds at most 16 messages (a configured window must not be
// smaller), and whose requests need no config beyond what the subject was
// loaded with (raw requests carry the config only of a ConfigSubject). Every
// case uses fresh session ids, so subjects that keep data outside the state
// (a database) may share it across cases.
func Cases() []Case { return CasesWith(Options{}) }

// CasesWith returns the conformance suite with opts.
func CasesWith(opts Options) []Case {
	cases := []Case{
		{Name: "describe", Doc: "describe returns PluginInfo of this ABI major with a name, a state schema and a valid initial state",
			Reasons: []Reason{ReasonDescribeInvalid, ReasonABIMajor}, Run: caseDescribe},
		{Name: "empty_state_initialised", Doc: "provide on the initial state returns no history, and store then provide works from it",
			Reasons: []Reason{ReasonInitialStateRejected, ReasonWrongHistory}, Run: caseEmptyState},
		{Name: "provide_returns_stored_in_order", Doc: "provide after several stores returns every stored message, request before response, in order",
			Reasons: []Reason{ReasonWrongHistory}, Run: caseStoredInOrder},
		{Name: "state_round_trips_through_json", Doc: "re-encoding the state with another JSON library between calls changes no result",
			Reasons: []Reason{ReasonReencodedStateDiffers, ReasonWrongHistory}, Run: caseStateRoundTrip},
		{Name: "state_keys_isolated", Doc: "two state keys, of one session or of two, never see each other's messages",
			Reasons: []Reason{ReasonKeysMixed}, Run: caseKeysIsolated},
		{Name: "unknown_fields_tolerated", Doc: "unknown fields in requests are ignored and unknown fields in messages are preserved",
			Reasons: []Reason{ReasonUnknownFieldsDropped, ReasonUnknownFieldsRejected}, Run: caseUnknownFields},
		{Name: "stateless_across_instances", Doc: "the same calls spread over different instances, in any interleaving of sessions, give the same results",
			Reasons: []Reason{ReasonInstanceDependent}, Run: caseStateless},
		{Name: "malformed_requests_rejected", Doc: "malformed describe, provide and store requests get invalid_argument, not a trap, and the subject keeps working",
			Reasons: []Reason{ReasonMalformedAccepted, ReasonWrongHistory}, Run: caseMalformed},
		{Name: "import_pages_read_back", Doc: "a history with tool calls, stored as an importer stores it (pages of request messages), reads back identical on any instance (from ABI 1.2)",
			Reasons: []Reason{ReasonImportRefused, ReasonImportDiffers}, Since: 2, Run: caseImport},
		{Name: "store_keeps_split_pairs", Doc: "stores that end between a tool call and its result, or start with a result whose call came before, are kept as given (from ABI 1.2)",
			Reasons: []Reason{ReasonSplitPairRefused, ReasonSplitPairAltered}, Since: 2, Run: caseSplitPairs},
		{Name: "list_returns_stored_in_order", Doc: "list's pages, with a small limit or the plugin's default, joined are every stored message in order",
			Reasons: []Reason{ReasonListIncomplete, ReasonPageOverLimit, ReasonCursorStuck, ReasonPagingUnbounded}, Run: caseListInOrder},
		{Name: "list_cursor_advances_and_ends", Doc: "list's cursor moves on every page, no page repeats, and paging reaches a last page in a bounded number of calls",
			Reasons: []Reason{ReasonCursorStuck, ReasonPagingUnbounded, ReasonPageOverLimit}, Run: caseListCursor},
		{Name: "clear_forgets_history", Doc: "after clear, provide and list return nothing, an older cursor gives an empty last page (from ABI 1.1), and the key works again",
			Reasons: []Reason{ReasonHistoryAfterClear, ReasonListAfterClear, ReasonCursorStuck, ReasonStaleCursor}, Run: caseClear},
		{Name: "rolled_back_run_leaves_nothing", Doc: "a run that stored and was then rolled back leaves nothing that provide returns, on its instance or another",
			Reasons: []Reason{ReasonRolledBackKept, ReasonWrongHistory}, Run: caseRolledBack},
		{Name: "retried_run_stores_once", Doc: "a run rolled back, or a store interrupted by its deadline, then retried, stores its messages exactly once",
			Reasons: []Reason{ReasonRetryDuplicated}, Run: caseRetried},
		{Name: "two_instances_one_history", Doc: "two instances serving keys alternately, and at once, give each key the history one instance would",
			Reasons: []Reason{ReasonInstanceDependent}, Run: caseTwoInstances},
		{Name: "readable_after_crashed_instance", Doc: "after stores killed by their deadline mid-call, the next instance reads the history stored before them and nothing of theirs (from ABI 1.2)",
			Reasons: []Reason{ReasonCrashLost, ReasonCrashHalfWritten}, Since: 2, Run: caseCrashed},
		{Name: "migrate_state_serves_result", Doc: "migrate_state upgrades a state of an older state_version to one that provide and store then serve",
			Reasons: []Reason{ReasonMigrateFailed, ReasonMigratedHistoryWrong, ReasonBadOlderState}, Run: caseMigrate(opts)},
	}
	for i := range cases {
		cases[i] = judging(cases[i])
	}
	return cases
}

// judging wraps a case's code: its result names the case, and what it
// finds against rules of a later minor than the plugin's is advice.
func judging(c Case) Case {
	name, since, run := c.Name, c.Since, c.Run
	c.Run = func(ctx context.Context, f Factory) error {
		j := judgeOf(ctx)
		if j == nil {
			j = &judge{declared: -1}
			ctx = context.WithValue(ctx, judgeKey{}, j)
		}
		j.caseName, j.since = name, since
		return judged(ctx, name, run(ctx, f))
	}
	return c
}

// MaxMessagesPerSession is the most messages the suite stores in one
// session slot. A plugin that bounds its history (abi/SPEC.md section
// 10.1) passes the suite under a configuration that keeps at least this
// many; TestSuiteStaysWithinMaxMessagesPerSession keeps the number true.
const MaxMessagesPerSession = 64

// Run runs every case as a subtest of t against subjects from f. A case
// that does not apply is skipped; advice (rules of a later ABI minor than
// the plugin declares) is logged, and does not fail the test.
func Run(t *testing.T, f Factory) {
	t.Helper()
	RunWith(t, f, Options{})
}

// RunWith is Run with opts.
func RunWith(t *testing.T, f Factory, opts Options) {
	t.Helper()
	for _, c := range CasesWith(opts) {
		t.Run(c.Name, func(t *testing.T) {
			v := c.Judge(t.Context(), f)
			for _, a := range v.Advice {
				t.Logf("advice: %v", a)
			}
			err := v.Err
			if why, ok := IsSkipped(err); ok {
				t.Skip(why)
			}
			if err != nil {
				t.Fatalf("%s: %v", c.Doc, err)
			}
		})
	}
}
