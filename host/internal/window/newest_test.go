package window

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

// history builds a history from b, two bytes a message: the first picks the
// role and the parts (calls and results from a few call ids, so that ids
// repeat, calls go unanswered and results answer nothing), the second the
// size of its text. Every message has its own id, so that a selection of
// the wrong messages never compares equal to the right one.
func history(b []byte) []abi.Message {
	ids := []string{"a", "b", "c"}
	var msgs []abi.Message
	for i := 0; i+1 < len(b); i += 2 {
		k, size := b[i], int(b[i+1])
		var m abi.Message
		switch k % 8 {
		case 0:
			m = abi.NewMessage(abi.RoleSystem, "")
		case 1, 2:
			m = abi.NewMessage(abi.RoleUser, "")
		case 3:
			m = abi.NewMessage(abi.RoleAssistant, "")
		case 4, 5: // an assistant calling one or two tools
			m = abi.NewMessage(abi.RoleAssistant, "")
			m.Contents = append(m.Contents, abi.Content{Type: abi.ContentFunctionCall, CallID: ids[int(k/8)%3], Name: "f"})
			if k%8 == 5 {
				m.Contents = append(m.Contents, abi.Content{Type: abi.ContentFunctionCall, CallID: ids[int(k/24)%3], Name: "g"})
			}
		case 6, 7: // a tool result, and sometimes a call in the same message
			m = abi.NewMessage(abi.RoleTool, "")
			m.Contents = []abi.Content{{Type: abi.ContentFunctionResult, CallID: ids[int(k/8)%3]}}
			if k/8%4 == 3 {
				m.Role = abi.RoleUser // results outside a tool message count too
			}
			if k%8 == 7 {
				m.Contents = append(m.Contents, abi.Content{Type: abi.ContentFunctionCall, CallID: ids[int(k/32)%3], Name: "h"})
			}
		}
		m.Contents = append(m.Contents, abi.Content{Type: abi.ContentText, Text: strings.Repeat("x", size)})
		m.MessageID = strconv.Itoa(len(msgs))
		msgs = append(msgs, m)
	}
	return msgs
}

// checkNewest checks that Newest, given every suffix of msgs' body, either
// leaves the window undecided or decides exactly what Apply does over the
// whole history, and decides it given the whole body. It returns the length
// of the shortest suffix that decided.
func checkNewest(t *testing.T, msgs []abi.Message, w abi.Window) int {
	t.Helper()
	want := Apply(msgs, w)
	var head, body []abi.Message
	body = msgs
	if len(msgs) > 0 && msgs[0].Role == abi.RoleSystem {
		head, body = msgs[:1], msgs[1:]
	}
	shortest := -1
	for k := 0; k <= len(body); k++ {
		got, ok := Newest(head, body[len(body)-k:], k == len(body), w)
		if k == len(body) {
			require.True(t, ok, "the whole history decides the window")
		}
		if !ok {
			continue
		}
		if shortest < 0 {
			shortest = k
		}
		require.Equal(t, ids(want), ids(got), "window %+v over the newest %d of %d messages", w, k, len(body))
		require.Equal(t, want, got)
	}
	return shortest
}

func ids(msgs []abi.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.MessageID
	}
	return out
}

func FuzzNewest(f *testing.F) {
	f.Add([]byte{0, 10, 1, 5, 4, 3, 6, 4, 1, 1}, uint8(3), uint16(0))
	f.Add([]byte{6, 4, 1, 5, 12, 3, 6, 4, 14, 4, 1, 1}, uint8(2), uint16(40))
	f.Add([]byte{4, 0, 1, 0, 1, 0, 1, 0, 6, 0, 1, 0}, uint8(3), uint16(0))
	f.Add([]byte{1, 1, 4, 1, 1, 1, 1, 1, 7, 1, 6, 1, 1, 1}, uint8(3), uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, maxMsgs uint8, maxTokens uint16) {
		if len(b) > 400 {
			return
		}
		checkNewest(t, history(b), abi.Window{MaxMessages: int(maxMsgs % 16), MaxTokens: int(maxTokens % 512)})
	})
}

// TestNewest runs the worst cases by name: groups across the window's edge,
// a call answered from far back, orphans at either end, a result that
// answers nothing, system messages after the first, token bounds.
func TestNewest(t *testing.T) {
	user := func(n int) []byte { return []byte{1, byte(n)} }
	call := []byte{4, 1}     // assistant calling "a"
	result := []byte{6, 1}   // tool result for "a"
	resultB := []byte{14, 1} // tool result for "b"
	system := []byte{0, 20}  // system message
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	many := func(p []byte, n int) []byte { return cat(repeat(p, n)...) }
	tests := []struct {
		name     string
		b        []byte
		w        abi.Window
		decideBy int // the newest messages that must decide it (0: any)
	}{
		{"plain history", cat(system, many(user(9), 50)), abi.Window{MaxMessages: 10}, 10},
		{"plain history, no system", many(user(9), 50), abi.Window{MaxMessages: 10}, 11},
		{"tokens", cat(system, many(user(40), 50)), abi.Window{MaxTokens: 100}, 10},
		{"both bounds", cat(system, many(user(40), 50)), abi.Window{MaxMessages: 3, MaxTokens: 1000}, 3},
		{"group across the edge", cat(many(user(1), 20), call, many(user(1), 3), result, user(1)), abi.Window{MaxMessages: 4}, 6},
		{"call answered from far back", cat(many(user(1), 5), call, many(user(1), 30), result), abi.Window{MaxMessages: 10}, 32},
		{"result answering nothing, newest", cat(many(user(1), 30), resultB, user(1)), abi.Window{MaxMessages: 5}, 0},
		{"orphan at the cut", cat(many(user(1), 20), result, result, many(user(1), 3)), abi.Window{MaxMessages: 5}, 0},
		{"system messages later", cat(system, many(cat(system, user(2)), 20)), abi.Window{MaxMessages: 7}, 7},
		{"one group larger than the window", cat(user(1), call, many(user(1), 10), result), abi.Window{MaxMessages: 5}, 12},
		{"first message a result", cat(result, many(user(1), 4)), abi.Window{MaxMessages: 9}, 0},
		{"unbounded", many(user(1), 10), abi.Window{}, 0},
		// The middle message answers the first call and calls again with
		// the same id: its result is the first call's, not its own.
		{"a result and a call of one id in one message", cat(user(1), call, user(1), user(1), []byte{7, 1}, result, user(1)), abi.Window{MaxMessages: 3}, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := history(tt.b)
			shortest := checkNewest(t, msgs, tt.w)
			if tt.decideBy > 0 {
				assert.LessOrEqual(t, shortest, tt.decideBy, "decided only by the newest %d messages", shortest)
				assert.GreaterOrEqual(t, shortest, 0)
			}
		})
	}
}

func repeat(p []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = p
	}
	return out
}
