package sdktest

import (
	"context"
	"testing"
)

// Case is one conformance check. Run drives only the Subject interface, on
// Subjects it gets from the factory, and returns an error that says what the
// provider did wrong; it needs no testing.T, so a command-line tool can run
// the suite against any plugin binary.
type Case struct {
	// Name identifies the case, e.g. "provide_returns_stored_in_order".
	Name string
	// Doc says in one sentence what a conforming provider does.
	Doc string
	Run func(ctx context.Context, f Factory) error
}

// Cases returns the conformance suite, in the order it runs.
//
// The suite expects a subject whose provide returns everything stored for a
// key when it holds at most 16 messages (a configured window must not be
// smaller), and whose requests need no config beyond what the subject was
// loaded with: raw requests (Subject.Call) carry no config. Every case uses
// fresh session ids, so subjects that keep data outside the state (a
// database) may share it across cases.
func Cases() []Case {
	return []Case{
		{Name: "describe", Doc: "describe returns PluginInfo of this ABI major with a name, a state schema and a valid initial state", Run: caseDescribe},
		{Name: "empty_state_initialised", Doc: "provide on the initial state returns no history, and store then provide works from it", Run: caseEmptyState},
		{Name: "provide_returns_stored_in_order", Doc: "provide after several stores returns every stored message, request before response, in order", Run: caseStoredInOrder},
		{Name: "state_round_trips_through_json", Doc: "re-encoding the state with another JSON library between calls changes no result", Run: caseStateRoundTrip},
		{Name: "state_keys_isolated", Doc: "two state keys, of one session or of two, never see each other's messages", Run: caseKeysIsolated},
		{Name: "unknown_fields_tolerated", Doc: "unknown fields in requests are ignored and unknown fields in messages are preserved", Run: caseUnknownFields},
		{Name: "stateless_across_instances", Doc: "the same calls spread over different instances, in any interleaving of sessions, give the same results", Run: caseStateless},
		{Name: "malformed_requests_rejected", Doc: "malformed describe, provide and store requests get invalid_argument, not a trap, and the subject keeps working", Run: caseMalformed},
	}
}

// Run runs every case as a subtest of t against subjects from f.
func Run(t *testing.T, f Factory) {
	t.Helper()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Run(t.Context(), f); err != nil {
				t.Fatalf("%s: %v", c.Doc, err)
			}
		})
	}
}
