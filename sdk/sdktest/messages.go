package sdktest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
)

// turn is what one run stores: its new request messages and the response.
type turn struct {
	request, response []json.RawMessage
}

// script returns n turns of distinct messages tagged with tag. The first
// turn opens with a system message and every third turn has a tool call and
// its result, so the history looks like a real agent's (and a window, were
// one applied, would have groups to keep together). Four turns hold 11
// messages.
func script(tag string, n int) []turn {
	turns := make([]turn, n)
	for i := range turns {
		t := &turns[i]
		if i == 0 {
			t.request = append(t.request, textMessage(abi.RoleSystem, tag+": be brief"))
		}
		t.request = append(t.request, textMessage(abi.RoleUser, fmt.Sprintf("%s: question %d %s", tag, i, edgeText[i%len(edgeText)])))
		if i%3 == 1 {
			id := fmt.Sprintf("%s-call-%d", tag, i)
			t.response = append(t.response, toolCall(id, "clock"), toolResult(id, fmt.Sprintf("%s: %d o'clock %s", tag, i, edgeText[(i+1)%len(edgeText)])))
		}
		t.response = append(t.response, textMessage(abi.RoleAssistant, fmt.Sprintf("%s: answer %d %s", tag, i, edgeText[(i+2)%len(edgeText)])))
	}
	return turns
}

// edgeText is message content that plugins get wrong: multi-byte UTF-8
// (two, three and four bytes, so UTF-16 lengths differ from UTF-8 ones),
// JSON escapes, control characters, U+2028 (escaped by some encoders, not
// by others) and an escaped NUL. Every turn of script carries some of it,
// so every case that stores text stores and reads it back.
var edgeText = []string{
	"J’aime le thé ☕",
	"naïve café 😀 Ελληνικά 中文",
	"\"quoted\" back\\slash\nnew line\ttab <&> \u2028 \x00 end",
}

// stored is what turns put in a history, in order.
func stored(turns []turn) []json.RawMessage {
	var out []json.RawMessage
	for _, t := range turns {
		out = append(out, t.request...)
		out = append(out, t.response...)
	}
	return out
}

func textMessage(role abi.Role, text string) json.RawMessage {
	return mustJSON(map[string]any{"role": role, "contents": []any{map[string]any{"type": abi.ContentText, "text": text}}})
}

func toolCall(id, name string) json.RawMessage {
	return mustJSON(map[string]any{"role": abi.RoleAssistant, "contents": []any{map[string]any{
		"type": abi.ContentFunctionCall, "call_id": id, "name": name, "arguments": map[string]any{"zone": "UTC"},
	}}})
}

func toolResult(id, result string) json.RawMessage {
	return mustJSON(map[string]any{"role": abi.RoleTool, "contents": []any{map[string]any{
		"type": abi.ContentFunctionResult, "call_id": id, "result": result,
	}}})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// newSessionID returns a session id no other run uses, so that subjects
// backed by storage outside the state can share it across cases and runs.
func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "sdktest-" + hex.EncodeToString(b[:])
}

// slot is one state key as the suite drives it: the facts of its calls and
// its current state, which the suite keeps as a host would.
type slot struct {
	facts abi.SessionFacts
	state json.RawMessage
}

func newSlot(s Subject, sessionID, key string) *slot {
	return &slot{facts: abi.SessionFacts{SessionID: sessionID, StateKey: key}, state: s.InitialState()}
}

func (sl *slot) store(ctx context.Context, s Subject, t turn) error {
	next, err := s.StoreState(ctx, sl.facts, sl.state, t.request, t.response)
	if err != nil {
		return failf(ReasonCallFailed, "store (key %q): %w", sl.facts.StateKey, err)
	}
	sl.state = next
	return nil
}

func (sl *slot) provide(ctx context.Context, s Subject, request ...json.RawMessage) ([]json.RawMessage, error) {
	history, next, err := s.ProvideState(ctx, sl.facts, sl.state, request)
	if err != nil {
		return nil, failf(ReasonCallFailed, "provide (key %q): %w", sl.facts.StateKey, err)
	}
	sl.state = next
	return history, nil
}

// sameMessages reports how got differs from want, comparing each message as
// JSON values: formatting and key order may change, content may not.
func sameMessages(got, want []json.RawMessage) error {
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) {
			return failf(ReasonWrongHistory, "got %d messages, want %d:\n got %s\nwant %s", len(got), len(want), summary(got), summary(want))
		}
		g, err := canonical(got[i])
		if err != nil {
			return failf(ReasonWrongHistory, "message %d is not JSON: %w", i, err)
		}
		w, err := canonical(want[i])
		if err != nil {
			return fmt.Errorf("expected message %d is not JSON: %w", i, err)
		}
		if g != w {
			return failf(ReasonWrongHistory, "message %d of %d differs:\n got %s\nwant %s\nwhole history:\n got %s\nwant %s", i, len(want), g, w, summary(got), summary(want))
		}
	}
	return nil
}

// canonical re-encodes a JSON value with sorted keys and no white space,
// keeping numbers as written.
func canonical(b []byte) (string, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", err
	}
	out, err := json.Marshal(v)
	return string(out), err
}

// summary shows a history briefly: each message's text, or its JSON when
// it has no text.
func summary(msgs []json.RawMessage) string {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		var msg abi.Message
		if json.Unmarshal(m, &msg) == nil && msg.TextContent() != "" {
			parts[i] = fmt.Sprintf("%s:%q", msg.Role, msg.TextContent())
		} else {
			parts[i] = string(m)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
