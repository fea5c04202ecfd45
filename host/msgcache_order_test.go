package host

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

// orderMsg is a message of the same length for every i below 1000, so that
// an edit of one into another keeps every byte offset.
func orderMsg(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"role":"user","contents":[{"type":"text","text":"message %03d `+strings.Repeat("x", 40)+`"}]}`, i))
}

func orderHistory(ids ...int) []json.RawMessage {
	h := make([]json.RawMessage, len(ids))
	for i, id := range ids {
		h[i] = orderMsg(id)
	}
	return h
}

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// withByte is raws with one byte of message i replaced, in new memory.
func withByte(raws []json.RawMessage, i, at int, b byte) []json.RawMessage {
	out := slices.Clone(raws)
	out[i] = slices.Clone(out[i])
	out[i][at] = b
	return out
}

// scratchDecode decodes raws with encoding/json alone: what decode must
// return whatever it remembers.
func scratchDecode(t *testing.T, raws []json.RawMessage) []abi.Message {
	t.Helper()
	msgs := make([]abi.Message, len(raws))
	for i, raw := range raws {
		require.NoError(t, json.Unmarshal(raw, &msgs[i]), "message %d", i)
	}
	return msgs
}

// TestDecodedMessagesOrderNeverStale decodes, after a history of 20
// messages, histories that differ from it where finding messages in the
// order of the last history could go wrong, and checks each against a
// decode from scratch: a message expected at its place but changed by a
// byte must be decoded from its new bytes, never answered from memory.
func TestDecodedMessagesOrderNeverStale(t *testing.T) {
	base := orderHistory(seq(0, 20)...)
	// The text's first digit: an edit that keeps the length.
	digit := strings.Index(string(base[0]), "message ") + len("message ")
	tests := []struct {
		name string
		next []json.RawMessage
	}{
		{"same", base},
		{"a turn more", append(slices.Clone(base), orderMsg(20), orderMsg(21))},
		{"first message edited, same length", withByte(base, 0, digit, '9')},
		{"last message of the prefix edited, same length", withByte(append(slices.Clone(base), orderMsg(20)), 19, digit, '9')},
		{"middle message edited, same length", withByte(base, 10, digit, '9')},
		{"last character of a text edited", withByte(base, 5, len(base[5])-5, 'z')},
		{"first message replaced by another remembered one", append(orderHistory(3), base[1:]...)},
		{"shorter", base[:7]},
		{"shorter by one", base[:19]},
		{"empty", nil},
		{"moved by one", append(slices.Clone(base[1:]), orderMsg(20))},
		{"moved by one, the new first edited", withByte(append(slices.Clone(base[1:]), orderMsg(20)), 0, digit, '8')},
		{"reordered", orderHistory(append([]int{1, 0}, seq(2, 20)...)...)},
		{"reversed", orderHistory(19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)},
		{"middle message removed", append(slices.Clone(base[:10]), base[11:]...)},
		{"message inserted", append(append(slices.Clone(base[:10]), orderMsg(50)), base[10:]...)},
		{"duplicates", orderHistory(0, 1, 1, 2, 0, 3, 3, 3, 4)},
		{"another history", orderHistory(seq(100, 130)...)},
	}
	for _, tt := range tests {
		for _, shared := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/shared=%v", tt.name, shared), func(t *testing.T) {
				var c decodedMessages
				msgs := make([]abi.Message, len(base))
				_, err := c.decode(base, msgs, shared, nil, nil)
				require.NoError(t, err)
				// Twice: the first follows base, the second follows itself.
				for pass := range 2 {
					msgs := make([]abi.Message, len(tt.next))
					_, err := c.decode(tt.next, msgs, shared, nil, nil)
					require.NoError(t, err)
					require.Equal(t, scratchDecode(t, tt.next), msgs, "pass %d", pass)
					assertLastIs(t, &c, tt.next)
				}
			})
		}
	}
}

// assertLastIs checks that the memory's order is raws', every entry where
// last says it is.
func assertLastIs(t *testing.T, c *decodedMessages, raws []json.RawMessage) {
	t.Helper()
	require.Len(t, c.last, len(raws))
	for i, e := range c.last {
		require.NotNil(t, e, "message %d", i)
		require.Equal(t, string(raws[i]), e.raw, "message %d", i)
		require.Same(t, e, c.last[e.pos], "message %d", i)
	}
}

// TestDecodedMessagesOrderFollowsHistory: a history that grows by a turn
// is found in the order of the last one, and the order keeps up.
func TestDecodedMessagesOrderFollowsHistory(t *testing.T) {
	var c decodedMessages
	history := orderHistory(seq(0, 10)...)
	for turn := range 5 {
		msgs := make([]abi.Message, len(history))
		_, err := c.decode(history, msgs, true, nil, nil)
		require.NoError(t, err)
		require.Equal(t, scratchDecode(t, history), msgs, "turn %d", turn)
		assertLastIs(t, &c, history)
		history = append(history, orderMsg(10+2*turn), orderMsg(11+2*turn))
	}
}

// TestDecodedMessagesOrderConcurrent decodes two histories that share
// nothing from several goroutines at once: each gets its own messages
// whatever order the other left. Run with -race.
func TestDecodedMessagesOrderConcurrent(t *testing.T) {
	var c decodedMessages
	histories := [][]json.RawMessage{orderHistory(seq(0, 50)...), orderHistory(seq(500, 560)...)}
	want := [][]abi.Message{scratchDecode(t, histories[0]), scratchDecode(t, histories[1])}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 50 {
				k := (g + round) % 2
				h := histories[k]
				if round%5 == 0 {
					h = append(slices.Clone(h), orderMsg(900+g)) // a miss, decoded outside the lock
				}
				msgs := make([]abi.Message, len(h))
				if _, err := c.decode(h, msgs, g%2 == 0, nil, nil); err != nil {
					errs <- err
					return
				}
				if !assert.Equal(t, want[k], msgs[:len(want[k])]) {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// FuzzDecodedMessagesOrder drives one memory through a sequence of
// histories, each an edit of the one before (ops from the fuzzer's bytes),
// with a memory small enough to start over, and checks every decode against
// one from scratch: the same messages, or the same failing index.
func FuzzDecodedMessagesOrder(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{10, 10, 10, 12, 3, 14, 5, 16, 1, 2, 200, 201, 202})
	f.Add([]byte{5, 5, 5, 5, 5, 0, 1, 0, 1, 0, 1, 255, 128, 64, 32})
	f.Fuzz(func(t *testing.T, ops []byte) {
		c := decodedMessages{floor: 2 << 10}
		var history []json.RawMessage
		for k := 0; k+1 < len(ops) && k < 200; k += 2 {
			op, arg := ops[k], int(ops[k+1])
			switch op % 7 {
			case 0, 1: // append a message, maybe one seen before
				history = append(history, orderMsg(arg%40))
			case 2: // truncate
				if len(history) > 0 {
					history = history[:arg%len(history)]
				}
			case 3: // change one byte (any byte: the message may stop being one)
				if len(history) > 0 {
					i := arg % len(history)
					history = withByte(history, i, (arg*7)%len(history[i]), ops[k]^0x55)
				}
			case 4: // swap two messages
				if len(history) > 1 {
					history = slices.Clone(history)
					i, j := arg%len(history), (arg/3)%len(history)
					history[i], history[j] = history[j], history[i]
				}
			case 5: // drop the first (a window that moves)
				if len(history) > 0 {
					history = history[1:]
				}
			case 6: // a message as long as the memory
				history = append(history, json.RawMessage(`{"role":"user","contents":[{"type":"text","text":"`+strings.Repeat("y", arg*16)+`"}]}`))
			}
			msgs := make([]abi.Message, len(history))
			i, err := c.decode(history, msgs, op&8 != 0, nil, checkRole)
			for j, raw := range history {
				var want abi.Message
				werr := json.Unmarshal(raw, &want)
				if werr == nil {
					werr = checkRole(&want)
				}
				if werr != nil {
					require.Error(t, err, "message %d is not one: %v", j, werr)
					return // one failure ends the history: decode stops at a failure
				}
				if err != nil && i == j {
					t.Fatalf("message %d refused, but it is a message: %v", j, err)
				}
				if err == nil {
					require.Equal(t, want, msgs[j], "op %d, message %d", k/2, j)
				}
			}
			require.NoError(t, err)
		}
	})
}

func checkRole(m *abi.Message) error {
	switch m.Role {
	case abi.RoleSystem, abi.RoleUser, abi.RoleAssistant, abi.RoleTool:
		return nil
	}
	return errBadRole
}

// TestCloneMessagesOwnContents: the copies cloneMessages makes share
// their contents' memory, but none can reach another's: an append to one
// message's contents leaves the next one as it was, and contents that were
// empty stay empty, not absent.
func TestCloneMessagesOwnContents(t *testing.T) {
	raws := []json.RawMessage{
		json.RawMessage(`{"role":"user","contents":[]}`),
		json.RawMessage(`{"role":"user","contents":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`),
		json.RawMessage(`{"role":"assistant","contents":[{"type":"function_call","call_id":"c","name":"f","arguments":{"a":1}}]}`),
		json.RawMessage(`{"role":"user"}`),
	}
	for n := range contentsChunk + 3 { // past a chunk
		raws = append(raws, orderMsg(n%1000))
	}
	var c decodedMessages
	shared := make([]abi.Message, len(raws))
	_, err := c.decode(raws, shared, true, nil, nil)
	require.NoError(t, err)
	got := slices.Clone(shared)
	cloneMessages(got)
	want := scratchDecode(t, raws)
	require.Equal(t, want, got)
	require.NotNil(t, got[0].Contents)
	require.Nil(t, got[3].Contents)
	for i := range got {
		got[i].Contents = append(got[i].Contents, abi.Content{Type: abi.ContentText, Text: "appended"})
		if len(got[i].Contents) > 1 {
			got[i].Contents[0].Text = "edited"
		}
		if i+1 < len(got) {
			require.Equal(t, want[i+1], got[i+1], "message %d after an append to message %d", i+1, i)
		}
	}
	require.Equal(t, want, scratchDecode(t, raws))
	require.Equal(t, want, shared, "the remembered messages are untouched")
}
