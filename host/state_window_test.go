package host

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/statepatch"
	"github.com/wasmhist/wasmhist/host/internal/window"
)

// windowHistory is a state of n messages: a leading system message when
// system is set, then users, assistants, tool-call groups every groupEvery
// messages (0: none) whose results come span messages after the call, and
// an orphan result (its call absent) at each index in orphans.
func windowHistory(n int, system bool, groupEvery, span int, orphans ...int) []string {
	var out []string
	orphan := map[int]bool{}
	for _, i := range orphans {
		orphan[i] = true
	}
	pendingAt := map[int]string{}
	for i := range n {
		text := fmt.Sprintf("message %d %s", i, strings.Repeat("x", i%37))
		var m string
		switch {
		case i == 0 && system:
			m = `{"role":"system","contents":[{"type":"text","text":"be brief"}]}`
		case orphan[i]:
			m = fmt.Sprintf(`{"role":"tool","contents":[{"type":"function_result","call_id":"gone-%d","result":1}]}`, i)
		case pendingAt[i] != "":
			m = fmt.Sprintf(`{"role":"tool","contents":[{"type":"function_result","call_id":%q,"result":%q}]}`, pendingAt[i], text)
		case groupEvery > 0 && i%groupEvery == 0:
			id := fmt.Sprintf("call-%d", i)
			pendingAt[i+span] = id
			m = fmt.Sprintf(`{"role":"assistant","contents":[{"type":"function_call","call_id":%q,"name":"f","arguments":{}}]}`, id)
		case i%2 == 0:
			m = fmt.Sprintf(`{"role":"user","contents":[{"type":"text","text":%q}]}`, text)
		default:
			m = fmt.Sprintf(`{"role":"assistant","contents":[{"type":"text","text":%q}]}`, text)
		}
		out = append(out, m)
	}
	return out
}

func stateOf(msgs []string) json.RawMessage {
	return json.RawMessage(`{"messages":[` + strings.Join(msgs, ",") + `]}`)
}

// wantWindow is the window over the whole history decoded, the reference
// the selection from the newest messages must equal.
func wantWindow(t *testing.T, msgs []string, w abi.Window) ([]abi.Message, []string) {
	t.Helper()
	all := make([]abi.Message, len(msgs))
	for i, m := range msgs {
		require.NoError(t, json.Unmarshal([]byte(m), &all[i]))
		all[i].MessageID = fmt.Sprint(i) // to find each kept one's bytes
	}
	kept := window.Apply(all, w)
	raws := make([]string, len(kept))
	for i := range kept {
		var idx int
		_, err := fmt.Sscan(kept[i].MessageID, &idx)
		require.NoError(t, err)
		raws[i] = msgs[idx]
		kept[i].MessageID = ""
	}
	return kept, raws
}

// A window chosen from the newest messages backwards keeps exactly what the
// window over the whole decoded history keeps, for histories built to
// reach past the first messages read: groups across the window's edge,
// calls answered from far back, orphan results near the newest end (which
// only the whole history proves to be orphans), token bounds.
func TestSelectFromStateWindowFromNewest(t *testing.T) {
	tests := []struct {
		name string
		msgs []string
		w    abi.Window
	}{
		{"plain, system", windowHistory(1000, true, 0, 0), abi.Window{MaxMessages: 20}},
		{"plain, no system", windowHistory(1000, false, 0, 0), abi.Window{MaxMessages: 20}},
		{"groups across the edge", windowHistory(1000, true, 7, 3), abi.Window{MaxMessages: 20}},
		{"call answered from far back", windowHistory(1000, true, 900, 95), abi.Window{MaxMessages: 20}},
		{"group larger than the window", windowHistory(1000, false, 950, 45), abi.Window{MaxMessages: 20}},
		{"orphan among the newest", windowHistory(1000, true, 0, 0, 995), abi.Window{MaxMessages: 20}},
		{"orphan at the cut", windowHistory(1000, true, 0, 0, 980, 981), abi.Window{MaxMessages: 20}},
		{"tokens", windowHistory(1000, true, 5, 2), abi.Window{MaxTokens: 3000}},
		{"tokens past the first reach", windowHistory(1000, true, 0, 0), abi.Window{MaxTokens: 9000}},
		{"both bounds", windowHistory(1000, true, 5, 2), abi.Window{MaxMessages: 300, MaxTokens: 2000}},
		{"window larger than the history", windowHistory(30, true, 4, 1), abi.Window{MaxMessages: 200}},
		{"window of the history less one", windowHistory(30, true, 0, 0), abi.Window{MaxMessages: 28}},
		{"window of the history less two", windowHistory(30, false, 3, 1), abi.Window{MaxMessages: 27}},
		{"no window", windowHistory(50, true, 4, 1), abi.Window{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, wantRaw := wantWindow(t, tt.msgs, tt.w)
			p := &Plugin{docs: statepatch.NewCache(4)}
			sel := &abi.StateSelection{Pointer: "/messages", Window: &tt.w}
			for range 2 { // the second round is served from memory
				raws, got, err := p.selectFromState(abi.ExportProvide, stateOf(tt.msgs), statepatch.Claim{}, sel, true)
				require.NoError(t, err)
				require.Equal(t, want, got)
				gotRaw := make([]string, len(raws))
				for i, r := range raws {
					gotRaw[i] = string(r)
				}
				require.Equal(t, wantRaw, gotRaw)
			}
		})
	}
}

// A windowed selection over a long history decodes about the window, not
// the history: the memory of decoded messages holds the first message and
// the newest ones read, where decoding the whole history put every message
// in it (a pass over the whole state each call).
func TestSelectFromStateWindowDecodesTheWindow(t *testing.T) {
	msgs := windowHistory(5000, true, 0, 0)
	p := &Plugin{docs: statepatch.NewCache(4)}
	sel := &abi.StateSelection{Pointer: "/messages", Window: &abi.Window{MaxMessages: 20}}
	_, got, err := p.selectFromState(abi.ExportProvide, stateOf(msgs), statepatch.Claim{}, sel, false)
	require.NoError(t, err)
	require.Len(t, got, 20)
	assert.LessOrEqual(t, len(p.decoded.m), 22, "messages decoded")
}

// The messages a window examines are checked as the whole history's are,
// and an error names the element's index in the array; the memory never
// answers for a message whose bytes changed, by an edit of the same length
// or by moving messages, so the window follows every change of the state.
func TestSelectFromStateWindowFollowsTheState(t *testing.T) {
	base := windowHistory(400, true, 9, 2)
	w := abi.Window{MaxMessages: 20}
	sel := &abi.StateSelection{Pointer: "/messages", Window: &w}
	p := &Plugin{docs: statepatch.NewCache(4)}
	_, _, err := p.selectFromState(abi.ExportProvide, stateOf(base), statepatch.Claim{}, sel, false)
	require.NoError(t, err)

	edit := func(f func(m []string)) []string {
		m := append([]string(nil), base...)
		f(m)
		return m
	}
	tests := []struct {
		name    string
		msgs    []string
		wantErr string
	}{
		{"same length edit", edit(func(m []string) { m[395] = strings.Replace(m[395], "message", "MESSAGE", 1) }), ""},
		{"reorder", edit(func(m []string) { m[390], m[396] = m[396], m[390] }), ""},
		{"duplicate", edit(func(m []string) { m[399] = m[398] }), ""},
		{"system message edited", edit(func(m []string) { m[0] = strings.Replace(m[0], "brief", "BRIEF", 1) }), ""},
		{"system message gone", edit(func(m []string) { m[0] = m[1] }), ""},
		{"bad role in the window", edit(func(m []string) { m[397] = `{"role":"robot","contents":[]}` }), `from_state /messages/397: role "robot"`},
		{"not a message in the window", edit(func(m []string) { m[385] = `{"role":1}` }), `from_state /messages/385: not a message`},
		{"bad first element", edit(func(m []string) { m[0] = `{"role":"robot","contents":[]}` }), `from_state /messages/0: role "robot"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raws, got, err := p.selectFromState(abi.ExportProvide, stateOf(tt.msgs), statepatch.Claim{}, sel, true)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrInvalidOutput)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			want, wantRaw := wantWindow(t, tt.msgs, w)
			require.Equal(t, want, got)
			for i := range raws {
				require.Equal(t, wantRaw[i], string(raws[i]))
			}
		})
	}
}
