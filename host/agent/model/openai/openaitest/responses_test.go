package openaitest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResponses(t *testing.T) {
	type step struct {
		body       string // may contain {prev}: the id of the previous successful response
		reply      *Reply
		wantStatus int
		wantInBody string
	}
	fc := func(id string) *Reply {
		r := Calls(ToolCall{ID: id, Name: "clock", Arguments: "{}"})
		return &r
	}
	txt := func(s string) *Reply { r := Text(s); return &r }
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "string input", steps: []step{
			{body: `{"model":"m","input":"hi"}`, reply: txt("hello"), wantStatus: 200, wantInBody: `"text":"hello","type":"output_text"`},
		}},
		{name: "continuation with previous_response_id", steps: []step{
			{body: `{"model":"m","input":"I like pasta"}`, reply: txt("noted"), wantStatus: 200},
			{body: `{"model":"m","previous_response_id":"{prev}","input":[{"role":"user","content":"what do I like?"}]}`, reply: txt("pasta"), wantStatus: 200, wantInBody: `"previous_response_id":"resp_`},
		}},
		{name: "unknown previous_response_id", steps: []step{
			{body: `{"model":"m","previous_response_id":"resp_nope","input":"x"}`, wantStatus: 400, wantInBody: "previous_response_not_found"},
		}},
		{name: "store false is not kept", steps: []step{
			{body: `{"model":"m","store":false,"input":"x"}`, reply: txt("a"), wantStatus: 200, wantInBody: `"store":false`},
			{body: `{"model":"m","previous_response_id":"{prev}","input":"y"}`, wantStatus: 400, wantInBody: "not found"},
		}},
		{name: "tool round trip", steps: []step{
			{body: `{"model":"m","input":"time?","tools":[{"type":"function","name":"clock","parameters":{"type":"object"}}]}`, reply: fc("call_1"), wantStatus: 200, wantInBody: `"call_id":"call_1"`},
			{body: `{"model":"m","previous_response_id":"{prev}","input":[{"type":"function_call_output","call_id":"call_1","output":"12:00"}]}`, reply: txt("noon"), wantStatus: 200},
		}},
		{name: "output for an unknown call", steps: []step{
			{body: `{"model":"m","input":"time?"}`, reply: fc("call_1"), wantStatus: 200},
			{body: `{"model":"m","previous_response_id":"{prev}","input":[{"type":"function_call_output","call_id":"call_9","output":"12:00"}]}`, wantStatus: 400, wantInBody: "No tool call found for function call output with call_id call_9"},
		}},
		{name: "call left without output", steps: []step{
			{body: `{"model":"m","input":"time?"}`, reply: fc("call_1"), wantStatus: 200},
			{body: `{"model":"m","previous_response_id":"{prev}","input":"never mind"}`, wantStatus: 400, wantInBody: "No tool output found for function call call_1"},
		}},
		{name: "stateless tool round trip in the input", steps: []step{
			{body: `{"model":"m","store":false,"input":[{"role":"user","content":"t?"},{"type":"function_call","call_id":"c","name":"clock","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"1"}]}`, reply: txt("one"), wantStatus: 200},
		}},
		{name: "output before its call in the input", steps: []step{
			{body: `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"1"},{"type":"function_call","call_id":"c","name":"clock","arguments":"{}"}]}`, wantStatus: 400, wantInBody: "No tool call found"},
		}},
		{name: "bad role", steps: []step{
			{body: `{"model":"m","input":[{"role":"tool","content":"x"}]}`, wantStatus: 400, wantInBody: "Invalid value: 'tool'"},
		}},
		{name: "previous_response_id and conversation together", steps: []step{
			{body: `{"model":"m","input":"x"}`, reply: txt("a"), wantStatus: 200},
			{body: `{"model":"m","previous_response_id":"{prev}","conversation":"conv_1","input":"y"}`, wantStatus: 400, wantInBody: "Mutually exclusive"},
		}},
		{name: "unknown conversation", steps: []step{
			{body: `{"model":"m","conversation":"conv_nope","input":"y"}`, wantStatus: 404, wantInBody: "Conversation with id 'conv_nope' not found"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(t)
			prev := ""
			for i, st := range tt.steps {
				if st.reply != nil {
					s.Enqueue(*st.reply)
				}
				r := post(t, s, "/responses", strings.ReplaceAll(st.body, "{prev}", prev))
				require.Equal(t, st.wantStatus, r.status, "step %d: status; body %s", i, r.raw)
				require.Contains(t, string(r.raw), st.wantInBody, "step %d: body", i)
				if r.status >= 400 {
					require.NotEmpty(t, errMessage(r), "step %d: error body is not OpenAI-shaped: %s", i, r.raw)
				}
				if id, _ := r.body["id"].(string); id != "" {
					prev = id
				}
			}
			require.Equal(t, 0, s.Pending(), "scripted replies unused")
		})
	}
}

func TestResponsesStoreDefault(t *testing.T) {
	tests := []struct {
		name       string
		store      string
		wantStored bool
	}{
		{name: "unset stores", store: "", wantStored: true},
		{name: "true stores", store: `"store":true,`, wantStored: true},
		{name: "false does not", store: `"store":false,`, wantStored: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(t)
			s.Enqueue(Text("a"))
			r := post(t, s, "/responses", `{"model":"m",`+tt.store+`"input":"x"}`)
			id, _ := r.body["id"].(string)
			require.Equal(t, tt.wantStored, s.StoredResponse(id))
		})
	}
}

func TestConversation(t *testing.T) {
	s := NewServer(t)
	r := post(t, s, "/conversations", `{}`)
	conv, _ := r.body["id"].(string)
	require.NotEmpty(t, conv, "no conversation id: %s", r.raw)
	s.Enqueue(Calls(ToolCall{ID: "c1", Name: "clock"}), Text("noon"))
	r = post(t, s, "/responses", `{"model":"m","conversation":"`+conv+`","input":"time?"}`)
	require.Equal(t, 200, r.status, "first turn: %s", r.raw)
	// The conversation now holds an unanswered call: a turn without its
	// output is refused, one with it is accepted.
	r = post(t, s, "/responses", `{"model":"m","conversation":{"id":"`+conv+`"},"input":"hm"}`)
	require.Equal(t, 400, r.status, "unanswered call accepted: %s", r.raw)
	r = post(t, s, "/responses", `{"model":"m","conversation":"`+conv+`","input":[{"type":"function_call_output","call_id":"c1","output":"12:00"}]}`)
	require.Equal(t, 200, r.status, "second turn: %s", r.raw)
	require.Contains(t, string(r.raw), `"conversation":{"id":"`+conv, "second turn")
}

func TestResponsesStream(t *testing.T) {
	s := NewServer(t)
	s.Enqueue(Reply{Text: "a b c", ToolCalls: []ToolCall{{ID: "c1", Name: "clock", Arguments: `{"x":1}`}}})
	r := post(t, s, "/responses", `{"model":"m","stream":true,"input":"x"}`)
	joined := string(r.raw)
	for _, want := range []string{
		"event: response.created", "event: response.output_text.delta", "event: response.function_call_arguments.done",
		"event: response.output_item.done", "event: response.completed",
	} {
		require.Contains(t, joined, want, "stream lacks %q", want)
	}
	data := sseData(t, r.raw)
	require.Equal(t, 1, strings.Count(joined, "event: response.completed"), "stream does not have one response.completed:\n%s", joined)
	require.NotEmpty(t, data, "stream has no data")
	require.Contains(t, data[len(data)-1], `"type":"response.completed"`, "stream does not end with response.completed")
	require.True(t, s.StoredResponse("resp_1"), "streamed response not stored")
}
