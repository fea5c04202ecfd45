package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/wasmhist/wasmhist/abi"
)

// FromChatMessage maps one Chat Completions message, as another framework
// keeps a conversation, back to an abi message: the inverse of
// ChatMessages, so that ChatMessages(FromChatMessage(m)) sends m again.
//
//	system, developer    system message, its text
//	user                 user message, its text; name becomes author_name
//	assistant            text, and one function_call part per tool call
//	tool                 tool message with one function_result part whose
//	                     result is the content as a JSON string
//
// Text given as an array of text parts is joined, as ChatMessages sends it.
// What abi or the client cannot carry is refused with
// ErrUnsupportedContent rather than dropped: image, audio and file parts,
// an assistant refusal or audio, the deprecated function_call and function
// role, and custom tool calls. Tool call arguments that are not JSON are
// kept as a JSON string, as Chat does with a model's broken arguments.
func FromChatMessage(m openai.ChatCompletionMessageParamUnion) (abi.Message, error) {
	switch {
	case m.OfSystem != nil:
		text, ok := optText(m.OfSystem.Content.OfString, m.OfSystem.Content.OfArrayOfContentParts)
		return textMessage(abi.RoleSystem, m.OfSystem.Name, text, ok)
	case m.OfDeveloper != nil:
		text, ok := optText(m.OfDeveloper.Content.OfString, m.OfDeveloper.Content.OfArrayOfContentParts)
		return textMessage(abi.RoleSystem, m.OfDeveloper.Name, text, ok)
	case m.OfUser != nil:
		text, ok, err := userText(m.OfUser.Content)
		if err != nil {
			return abi.Message{}, err
		}
		return textMessage(abi.RoleUser, m.OfUser.Name, text, ok)
	case m.OfAssistant != nil:
		return assistantMessage(m.OfAssistant)
	case m.OfTool != nil:
		t := m.OfTool
		if t.ToolCallID == "" {
			return abi.Message{}, fmt.Errorf("openai: tool message without tool_call_id")
		}
		text, ok := optText(t.Content.OfString, t.Content.OfArrayOfContentParts)
		if !ok {
			return abi.Message{}, fmt.Errorf("openai: tool message %s: no content", t.ToolCallID)
		}
		result, _ := json.Marshal(text)
		return abi.Message{Role: abi.RoleTool, Contents: []abi.Content{{
			Type: abi.ContentFunctionResult, CallID: t.ToolCallID, Result: result,
		}}}, nil
	case m.OfFunction != nil:
		return abi.Message{}, fmt.Errorf("%w: the deprecated function role (use tool)", ErrUnsupportedContent)
	}
	return abi.Message{}, fmt.Errorf("openai: message has no known role (system, developer, user, assistant, tool)")
}

func textMessage(role abi.Role, name param.Opt[string], text string, ok bool) (abi.Message, error) {
	if !ok {
		return abi.Message{}, fmt.Errorf("openai: %s message: content is missing or not text", role)
	}
	m := abi.NewMessage(role, text)
	if name.Valid() {
		m.AuthorName = name.Value
	}
	return m, nil
}

func assistantMessage(a *openai.ChatCompletionAssistantMessageParam) (abi.Message, error) {
	switch {
	case a.Refusal.Valid():
		return abi.Message{}, fmt.Errorf("%w: an assistant refusal", ErrUnsupportedContent)
	case !param.IsOmitted(a.Audio):
		return abi.Message{}, fmt.Errorf("%w: assistant audio", ErrUnsupportedContent)
	//lint:ignore SA1019 the deprecated field is read only to refuse it with a clear error
	case !param.IsOmitted(a.FunctionCall):
		return abi.Message{}, fmt.Errorf("%w: the deprecated function_call (use tool_calls)", ErrUnsupportedContent)
	}
	m := abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{}}
	if a.Name.Valid() {
		m.AuthorName = a.Name.Value
	}
	var b strings.Builder
	hasText := a.Content.OfString.Valid()
	b.WriteString(a.Content.OfString.Value)
	for _, p := range a.Content.OfArrayOfContentParts {
		if p.OfText == nil {
			return abi.Message{}, fmt.Errorf("%w: an assistant refusal part", ErrUnsupportedContent)
		}
		hasText = true
		b.WriteString(p.OfText.Text)
	}
	if hasText {
		m.Contents = append(m.Contents, abi.Text(b.String()))
	}
	for _, tc := range a.ToolCalls {
		f := tc.OfFunction
		if f == nil {
			return abi.Message{}, fmt.Errorf("%w: a custom tool call", ErrUnsupportedContent)
		}
		if f.ID == "" || f.Function.Name == "" {
			return abi.Message{}, fmt.Errorf("openai: assistant tool call without id or function name")
		}
		m.Contents = append(m.Contents, abi.Content{
			Type: abi.ContentFunctionCall, CallID: f.ID, Name: f.Function.Name,
			Arguments: callArguments(f.Function.Arguments),
		})
	}
	if len(m.Contents) == 0 {
		return abi.Message{}, fmt.Errorf("openai: assistant message without content or tool_calls")
	}
	return m, nil
}

// optText is a string content, or its text parts joined; ok is false when
// there is neither.
func optText(s param.Opt[string], parts []openai.ChatCompletionContentPartTextParam) (string, bool) {
	if s.Valid() {
		return s.Value, true
	}
	if len(parts) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), true
}

func userText(c openai.ChatCompletionUserMessageParamContentUnion) (string, bool, error) {
	if c.OfString.Valid() {
		return c.OfString.Value, true, nil
	}
	if len(c.OfArrayOfContentParts) == 0 {
		return "", false, nil
	}
	var b strings.Builder
	for _, p := range c.OfArrayOfContentParts {
		if p.OfText == nil {
			return "", false, fmt.Errorf("%w: a user %s part (only text is kept)", ErrUnsupportedContent, partType(p))
		}
		b.WriteString(p.OfText.Text)
	}
	return b.String(), true, nil
}

func partType(p openai.ChatCompletionContentPartUnionParam) string {
	switch {
	case p.OfImageURL != nil:
		return "image_url"
	case p.OfInputAudio != nil:
		return "input_audio"
	case p.OfFile != nil:
		return "file"
	}
	return "non-text"
}
