package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// ResponsesRequest is the part of a responses request body the fake reads.
type ResponsesRequest struct {
	Model string `json:"model"`
	// Input is a string or an array of input items; see Items.
	Input              json.RawMessage `json:"input,omitempty"`
	Instructions       string          `json:"instructions,omitempty"`
	PreviousResponseID string          `json:"previous_response_id,omitempty"`
	// Conversation is a conversation id string or an object with an id.
	Conversation json.RawMessage `json:"conversation,omitempty"`
	Store        *bool           `json:"store,omitempty"`
	Stream       bool            `json:"stream,omitempty"`
	Tools        []ResponsesTool `json:"tools,omitempty"`
}

// ResponsesTool is one tool offered to the model.
type ResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Item is one input or output item of the Responses API.
type Item struct {
	Type   string `json:"type,omitempty"`
	ID     string `json:"id,omitempty"`
	Status string `json:"status,omitempty"`
	// message
	Role    string          `json:"role,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
	// function_call, function_call_output
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	// Output is a string or an array of content parts.
	Output json.RawMessage `json:"output,omitempty"`
}

// Text returns a message item's text: the string content, or its
// input_text/output_text parts joined.
func (it Item) Text() string {
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(it.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "input_text" || p.Type == "output_text" || p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func (it Item) kind() string {
	if it.Type == "" && it.Role != "" {
		return "message"
	}
	return it.Type
}

// Items decodes Input: a string is one user message.
func (r *ResponsesRequest) Items() ([]Item, error) {
	in := strings.TrimSpace(string(r.Input))
	if in == "" || in == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(r.Input, &s) == nil {
		return []Item{{Type: "message", Role: "user", Content: jsonString(s)}}, nil
	}
	var items []Item
	if err := json.Unmarshal(r.Input, &items); err != nil {
		return nil, invalid("input", "Invalid 'input': expected a string or an array of input items.")
	}
	return items, nil
}

// ConversationID returns the conversation the request continues, if any.
func (r *ResponsesRequest) ConversationID() string {
	var s string
	if json.Unmarshal(r.Conversation, &s) == nil {
		return s
	}
	var o struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(r.Conversation, &o)
	return o.ID
}

type storedResponse struct {
	id            string
	prev          string
	input, output []Item
	body          map[string]any
}

type conversation struct {
	items []Item
}

// contextLocked returns the items the service already holds for a request:
// the previous response chain, oldest first, or the conversation's items.
func (s *Server) contextLocked(rr *ResponsesRequest) ([]Item, error) {
	if rr.PreviousResponseID != "" && rr.ConversationID() != "" {
		return nil, invalid("previous_response_id", "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.")
	}
	if id := rr.ConversationID(); id != "" {
		c, ok := s.conversations[id]
		if !ok {
			return nil, &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "conversation",
				Message: fmt.Sprintf("Conversation with id '%s' not found.", id)}
		}
		return append([]Item(nil), c.items...), nil
	}
	var chain []*storedResponse
	for id := rr.PreviousResponseID; id != ""; {
		sr, ok := s.responses[id]
		if !ok {
			return nil, &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error",
				Param: "previous_response_id", Code: "previous_response_not_found",
				Message: fmt.Sprintf("Previous response with id '%s' not found.", id)}
		}
		chain = append(chain, sr)
		id = sr.prev
	}
	var items []Item
	for i := len(chain) - 1; i >= 0; i-- {
		items = append(items, chain[i].input...)
		items = append(items, chain[i].output...)
	}
	return items, nil
}

// validateResponses applies the service's rules to a request's input given
// the items the service already holds.
func validateResponses(rr *ResponsesRequest, held, input []Item) error {
	if rr.Model == "" {
		return invalid("model", "Missing required parameter: 'model'.")
	}
	for i, t := range rr.Tools {
		if t.Type == "function" && !toolName.MatchString(t.Name) {
			return invalid(fmt.Sprintf("tools[%d].name", i), "Invalid 'tools[%d].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i)
		}
	}
	if len(input) == 0 && rr.PreviousResponseID == "" && rr.ConversationID() == "" {
		return invalid("input", "Missing required parameter: 'input'.")
	}
	calls := map[string]bool{}
	answered := map[string]bool{}
	var order []string
	for _, it := range held {
		switch it.kind() {
		case "function_call":
			calls[it.CallID] = true
			order = append(order, it.CallID)
		case "function_call_output":
			answered[it.CallID] = true
		}
	}
	for i, it := range input {
		param := fmt.Sprintf("input[%d]", i)
		switch it.kind() {
		case "message":
			switch it.Role {
			case "user", "assistant", "system", "developer":
			default:
				return invalid(param+".role", "Invalid value: '%s'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", it.Role)
			}
			if c := strings.TrimSpace(string(it.Content)); c == "" || c == "null" {
				return invalid(param+".content", "Missing required parameter: '%s.content'.", param)
			}
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return invalid(param, "Missing required parameter: '%s.call_id' or '%s.name'.", param, param)
			}
			if calls[it.CallID] {
				return invalid(param+".call_id", "Duplicate function call with call_id %s.", it.CallID)
			}
			calls[it.CallID] = true
			order = append(order, it.CallID)
		case "function_call_output":
			if it.CallID == "" {
				return invalid(param+".call_id", "Missing required parameter: '%s.call_id'.", param)
			}
			if o := strings.TrimSpace(string(it.Output)); o == "" || o == "null" {
				return invalid(param+".output", "Missing required parameter: '%s.output'.", param)
			}
			if !calls[it.CallID] {
				return invalid("input", "No tool call found for function call output with call_id %s.", it.CallID)
			}
			if answered[it.CallID] {
				return invalid("input", "Duplicate function call output for call_id %s.", it.CallID)
			}
			answered[it.CallID] = true
		case "reasoning", "item_reference":
		default:
			return invalid(param+".type", "Invalid value: '%s'. Supported values are: 'message', 'function_call', 'function_call_output', 'reasoning' and 'item_reference'.", it.Type)
		}
	}
	for _, id := range order {
		if !answered[id] {
			return invalid("input", "No tool output found for function call %s.", id)
		}
	}
	return nil
}

func (s *Server) serveGetResponse(w http.ResponseWriter, id string) {
	s.mu.Lock()
	sr, ok := s.responses[id]
	s.mu.Unlock()
	if !ok {
		writeError(w, &APIError{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("Response with id '%s' not found.", id)})
		return
	}
	writeJSON(w, http.StatusOK, sr.body)
}

func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request, rec Request) {
	rr := rec.Responses
	if rr == nil {
		writeError(w, invalid("", "We could not parse the JSON body of your request."))
		return
	}
	input, err := rr.Items()
	if err != nil {
		writeError(w, err.(*APIError))
		return
	}
	s.mu.Lock()
	held, err := s.contextLocked(rr)
	s.mu.Unlock()
	if err == nil {
		err = validateResponses(rr, held, input)
	}
	if err != nil {
		writeError(w, err.(*APIError))
		return
	}
	rp := s.next(rec)
	if rp.Err != nil {
		writeError(w, rp.Err)
		return
	}

	id := s.nextID("resp_")
	var output []Item
	var msgID string
	if txt := rp.text(); txt != "" || (len(rp.ToolCalls) == 0 && rp.TextDeltas == nil) {
		msgID = s.nextID("msg_")
		output = append(output, Item{Type: "message", ID: msgID, Status: "completed", Role: "assistant",
			Content: mustJSON([]any{map[string]any{"type": "output_text", "text": txt, "annotations": []any{}}})})
	}
	for _, c := range s.calls(rp) {
		output = append(output, Item{Type: "function_call", ID: s.nextID("fc_"), Status: "completed",
			CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	store := rr.Store == nil || *rr.Store
	u := rp.usage()
	body := map[string]any{
		"id": id, "object": "response", "created_at": createdAt, "status": "completed",
		"model": rr.Model, "output": output, "previous_response_id": nullable(rr.PreviousResponseID),
		"store": store, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"text": map[string]any{"format": map[string]any{"type": "text"}},
		"usage": map[string]any{
			"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
			"total_tokens":          u.InputTokens + u.OutputTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": 0},
			"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		},
	}
	if cid := rr.ConversationID(); cid != "" {
		body["conversation"] = map[string]any{"id": cid}
	}

	commit := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if store {
			s.responses[id] = &storedResponse{id: id, prev: rr.PreviousResponseID, input: input, output: output, body: body}
		}
		if c, ok := s.conversations[rr.ConversationID()]; ok {
			c.items = append(c.items, input...)
			c.items = append(c.items, output...)
		}
	}

	if !rr.Stream {
		commit()
		writeJSON(w, http.StatusOK, body)
		return
	}

	ev := newSSE(w)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		ev.send(typ, fields)
	}
	inProgress := map[string]any{}
	for k, v := range body {
		inProgress[k] = v
	}
	inProgress["status"] = "in_progress"
	inProgress["output"] = []any{}
	inProgress["usage"] = nil
	send("response.created", map[string]any{"response": inProgress})
	for idx, it := range output {
		switch it.Type {
		case "message":
			added := it
			added.Status, added.Content = "in_progress", json.RawMessage("[]")
			send("response.output_item.added", map[string]any{"output_index": idx, "item": added})
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
			send("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": idx, "content_index": 0, "part": part})
			for _, d := range rp.deltas() {
				send("response.output_text.delta", map[string]any{"item_id": it.ID, "output_index": idx, "content_index": 0, "delta": d, "logprobs": []any{}})
			}
			if rp.HoldOpen {
				s.hold(r)
				return
			}
			send("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": idx, "content_index": 0, "text": rp.text(), "logprobs": []any{}})
			part["text"] = rp.text()
			send("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": idx, "content_index": 0, "part": part})
		case "function_call":
			added := map[string]any{"type": it.Type, "id": it.ID, "status": "in_progress", "call_id": it.CallID, "name": it.Name, "arguments": ""}
			send("response.output_item.added", map[string]any{"output_index": idx, "item": added})
			half := len(it.Arguments) / 2
			for _, piece := range []string{it.Arguments[:half], it.Arguments[half:]} {
				send("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": idx, "delta": piece})
			}
			send("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": idx, "name": it.Name, "arguments": it.Arguments})
		}
		send("response.output_item.done", map[string]any{"output_index": idx, "item": it})
	}
	if rp.HoldOpen {
		s.hold(r)
		return
	}
	commit()
	send("response.completed", map[string]any{"response": body})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
