package reducer

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

// Messages are named by their first text part or call id so that a failing
// case prints which ones were kept.
func sys(s string) abi.Message  { return abi.NewMessage(abi.RoleSystem, s) }
func user(s string) abi.Message { return abi.NewMessage(abi.RoleUser, s) }
func asst(s string) abi.Message { return abi.NewMessage(abi.RoleAssistant, s) }

func calls(ids ...string) abi.Message {
	m := abi.Message{Role: abi.RoleAssistant}
	for _, id := range ids {
		m.Contents = append(m.Contents, abi.Content{Type: abi.ContentFunctionCall, CallID: id, Name: "f", Arguments: json.RawMessage(`{}`)})
	}
	return m
}

func result(id string) abi.Message {
	return abi.Message{Role: abi.RoleTool, Contents: []abi.Content{{Type: abi.ContentFunctionResult, CallID: id, Result: json.RawMessage(`1`)}}}
}

func names(msgs []abi.Message) string {
	var out []string
	for _, m := range msgs {
		switch {
		case len(m.CallIDs()) > 0:
			out = append(out, "call:"+strings.Join(m.CallIDs(), "+"))
		case len(m.ResultIDs()) > 0:
			out = append(out, "result:"+strings.Join(m.ResultIDs(), "+"))
		default:
			out = append(out, m.TextContent())
		}
	}
	return strings.Join(out, " ")
}

func TestApplyWindow(t *testing.T) {
	history := []abi.Message{sys("S"), user("u1"), calls("a"), result("a"), asst("a1"), user("u2"), calls("b", "c"), result("b"), result("c"), asst("a2")}
	tests := []struct {
		name string
		in   []abi.Message
		w    abi.Window
		want string
	}{
		{"empty", nil, abi.Window{MaxMessages: 3}, ""},
		{"zero window keeps all", history, abi.Window{}, "S u1 call:a result:a a1 u2 call:b+c result:b result:c a2"},
		{"newest kept, system kept", history, abi.Window{MaxMessages: 3}, "S a2"},
		// 4 would keep result:b result:c without their call; the whole group goes.
		{"tool group not split at edge", history, abi.Window{MaxMessages: 4}, "S a2"},
		{"tool group kept whole when it fits", history, abi.Window{MaxMessages: 5}, "S call:b+c result:b result:c a2"},
		{"group plus older message", history, abi.Window{MaxMessages: 6}, "S u2 call:b+c result:b result:c a2"},
		{"single-call pair at edge not split", history, abi.Window{MaxMessages: 8}, "S a1 u2 call:b+c result:b result:c a2"},
		{"single-call pair at edge kept", history, abi.Window{MaxMessages: 9}, "S call:a result:a a1 u2 call:b+c result:b result:c a2"},
		{"system only when bound is 1", history, abi.Window{MaxMessages: 1}, "S"},
		{"bound larger than history", history, abi.Window{MaxMessages: 100}, "S u1 call:a result:a a1 u2 call:b+c result:b result:c a2"},
		{"no system message", []abi.Message{user("u1"), asst("a1"), user("u2")}, abi.Window{MaxMessages: 2}, "a1 u2"},
		{"system message only kept when leading", []abi.Message{user("u1"), sys("S"), user("u2")}, abi.Window{MaxMessages: 1}, "u2"},
		{"orphan result at edge dropped", []abi.Message{result("x"), user("u1")}, abi.Window{MaxMessages: 2}, "u1"},
		{"orphan result at edge dropped when unbounded", []abi.Message{sys("S"), result("x"), user("u1")}, abi.Window{}, "S u1"},
		{"orphan result behind cut dropped not kept alone", []abi.Message{user("u0"), result("x"), result("y"), user("u1")}, abi.Window{MaxMessages: 3}, "u1"},
		{"trailing call without result kept", []abi.Message{user("u1"), calls("z")}, abi.Window{MaxMessages: 1}, "call:z"},
		{"interleaved calls merge into one group", []abi.Message{user("u1"), calls("a"), calls("b"), result("a"), result("b"), asst("done")}, abi.Window{MaxMessages: 3}, "done"},
		{"interleaved calls kept whole", []abi.Message{user("u1"), calls("a"), calls("b"), result("a"), result("b"), asst("done")}, abi.Window{MaxMessages: 5}, "call:a call:b result:a result:b done"},
		{"tokens: system counts", history, abi.Window{MaxTokens: EstimateTokens(sys("S")) + EstimateTokens(asst("a2"))}, "S a2"},
		{"tokens: group needs whole budget", history, abi.Window{MaxTokens: EstimateTokens(sys("S")) + EstimateTokens(asst("a2")) + EstimateTokens(calls("b", "c")) + 2*EstimateTokens(result("b")) - 1}, "S a2"},
		{"tokens: group fits", history, abi.Window{MaxTokens: EstimateTokens(sys("S")) + EstimateTokens(asst("a2")) + EstimateTokens(calls("b", "c")) + 2*EstimateTokens(result("b"))}, "S call:b+c result:b result:c a2"},
		{"tokens: system kept over budget", history, abi.Window{MaxTokens: 1}, "S"},
		{"both bounds: tighter wins", history, abi.Window{MaxMessages: 100, MaxTokens: EstimateTokens(sys("S")) + EstimateTokens(asst("a2"))}, "S a2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]abi.Message(nil), tc.in...)
			got := ApplyWindow(tc.in, tc.w)
			require.Equal(t, tc.want, names(got), "ApplyWindow(%s, %+v)", names(in), tc.w)
			require.Equal(t, names(in), names(tc.in), "input modified")
			if len(got) > 0 && len(tc.in) > 0 {
				require.NotSame(t, &tc.in[0], &got[0], "result aliases the input's backing array")
			}
		})
	}
}

func TestReducers(t *testing.T) {
	history := []abi.Message{sys("S"), user("u1"), calls("a"), result("a"), asst("a1")}
	tests := []struct {
		name string
		r    Reducer
		want string
	}{
		{"message window", MessageWindow{Max: 3}, "S a1"},
		{"message window edge keeps pair", MessageWindow{Max: 4}, "S call:a result:a a1"},
		{"message window zero keeps all", MessageWindow{}, "S u1 call:a result:a a1"},
		{"token window default estimate", TokenWindow{MaxTokens: EstimateTokens(sys("S")) + EstimateTokens(asst("a1"))}, "S a1"},
		{"token window custom estimate", TokenWindow{MaxTokens: 4, Estimate: func(abi.Message) int { return 1 }}, "S call:a result:a a1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.r.Reduce(context.Background(), history)
			require.NoError(t, err)
			require.Equal(t, tc.want, names(got))
		})
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		name string
		m    abi.Message
		want int
	}{
		{"empty", abi.Message{Role: abi.RoleUser}, 4},
		{"four bytes", user("abcd"), 5},
		{"rounds up", user("abcde"), 6},
		{"media flat", abi.Message{Role: abi.RoleUser, Contents: []abi.Content{{Type: abi.ContentURI, URI: strings.Repeat("x", 400)}}}, 4 + 85},
		{"call counts name and arguments", abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "id", Name: "ab", Arguments: json.RawMessage(`{"x":1}`)}}}, 4 + 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, EstimateTokens(tc.m))
		})
	}
}
