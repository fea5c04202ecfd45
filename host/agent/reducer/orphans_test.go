package reducer

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/wasmhist/wasmhist/abi"
)

func TestStripOrphans(t *testing.T) {
	textAndCall := abi.Message{
		Role:                 abi.RoleAssistant,
		MessageID:            "m1",
		AdditionalProperties: map[string]json.RawMessage{"k": json.RawMessage(`"v"`)},
		Contents: []abi.Content{
			abi.Text("checking"),
			{Type: abi.ContentURI, URI: "https://example.invalid/a.png", MediaType: "image/png"},
			{Type: abi.ContentFunctionCall, CallID: "x", Name: "f"},
		},
	}
	stripped := textAndCall
	stripped.Contents = textAndCall.Contents[:2]
	pureFrame := abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{
		{Type: abi.ContentURI, URI: "https://example.invalid/b.png"},
		{Type: abi.ContentFunctionCall, CallID: "y", Name: "f"},
	}}
	tests := []struct {
		name string
		in   []abi.Message
		want []abi.Message
	}{
		{"paired kept", []abi.Message{user("u"), calls("a"), result("a"), asst("t")}, []abi.Message{user("u"), calls("a"), result("a"), asst("t")}},
		{"pure call frame dropped", []abi.Message{user("u"), calls("a")}, []abi.Message{user("u")}},
		{"pure frame with media dropped", []abi.Message{user("u"), pureFrame}, []abi.Message{user("u")}},
		{"text, metadata and media kept, call dropped", []abi.Message{user("u"), textAndCall}, []abi.Message{user("u"), stripped}},
		{"partial: answered call kept, orphan dropped", []abi.Message{calls("a", "b"), result("a")}, []abi.Message{calls("a"), result("a")}},
		{"orphan result dropped", []abi.Message{user("u"), result("z"), asst("t")}, []abi.Message{user("u"), asst("t")}},
		{"no tool parts unchanged", []abi.Message{sys("S"), user("u"), asst("t")}, []abi.Message{sys("S"), user("u"), asst("t")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := names(tc.in)
			got := StripOrphans(tc.in)
			require.Equal(t, tc.want, got)
			require.Equal(t, before, names(tc.in), "input modified")

			// Appended after a message, and in place: the messages
			// continue the destination in its own array.
			lead := sys("lead")
			require.Equal(t, append([]abi.Message{lead}, tc.want...), AppendStripOrphans([]abi.Message{lead}, tc.in))
			buf := append(append(make([]abi.Message, 0, 1+len(tc.in)), lead), tc.in...)
			require.Equal(t, append([]abi.Message{lead}, tc.want...), AppendStripOrphans(buf[:1], buf[1:]))
		})
	}
}

func TestStripOrphanCalls(t *testing.T) {
	// A batch that answers a call stored by an earlier run keeps the answer.
	in := []abi.Message{result("old"), user("u"), calls("a", "b"), result("a")}
	got := names(StripOrphanCalls(in))
	require.Equal(t, "result:old u call:a result:a", got)
}
