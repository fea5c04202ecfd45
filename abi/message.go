package abi

import "encoding/json"

// Role is who authored a message.
type Role string

// Roles, as the OpenAI-compatible APIs name them.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ContentType names the kind of one content part.
type ContentType string

// Content part types.
const (
	ContentText           ContentType = "text"
	ContentFunctionCall   ContentType = "function_call"
	ContentFunctionResult ContentType = "function_result"
	ContentData           ContentType = "data"
	ContentURI            ContentType = "uri"
	ContentReasoning      ContentType = "reasoning"
	ContentUsage          ContentType = "usage"
)

// Message is one chat message: a role and an ordered list of typed content
// parts. Unknown fields are kept in AdditionalProperties so that a message a
// newer host wrote survives a round trip through an older one.
type Message struct {
	Role       Role      `json:"role"`
	Contents   []Content `json:"contents"`
	MessageID  string    `json:"message_id,omitempty"`
	AuthorName string    `json:"author_name,omitempty"`
	// CreatedAt is an RFC 3339 timestamp.
	CreatedAt string `json:"created_at,omitempty"`
	// Source says where a request message came from. The host sets it; it
	// is how messages loaded from history are kept from being stored again.
	Source *Source `json:"source,omitempty"`

	AdditionalProperties map[string]json.RawMessage `json:"additional_properties,omitempty"`
}

// Content is one part of a message. Which fields are meaningful depends on
// Type; see SPEC.md section "Messages".
type Content struct {
	Type ContentType `json:"type"`

	// text, reasoning
	Text string `json:"text,omitempty"`

	// function_call and function_result: CallID pairs a result with its call.
	CallID string `json:"call_id,omitempty"`
	// function_call
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// function_result: Result on success, Error on failure.
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`

	// data (base64 in JSON) and uri
	MediaType string `json:"media_type,omitempty"`
	Data      []byte `json:"data,omitempty"`
	URI       string `json:"uri,omitempty"`

	// usage
	Usage *Usage `json:"usage,omitempty"`

	AdditionalProperties map[string]json.RawMessage `json:"additional_properties,omitempty"`
}

// Usage counts tokens of one model call.
type Usage struct {
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
	TotalTokens  int64 `json:"total_tokens,omitempty"`
}

// SourceType says where a request message came from.
type SourceType string

// Source types.
const (
	// SourceExternal is input the caller passed to the run.
	SourceExternal SourceType = "external"
	// SourceChatHistory is a message a history provider returned from provide.
	SourceChatHistory SourceType = "chat_history"
	// SourceContextProvider is a message a context provider added.
	SourceContextProvider SourceType = "context_provider"
)

// Source attributes a message to its origin; ID names the provider.
type Source struct {
	Type SourceType `json:"type"`
	ID   string     `json:"id,omitempty"`
}

// Text returns a text content part.
func Text(s string) Content { return Content{Type: ContentText, Text: s} }

// NewMessage returns a message with the given role and text parts.
func NewMessage(role Role, texts ...string) Message {
	m := Message{Role: role, Contents: make([]Content, 0, len(texts))}
	for _, t := range texts {
		m.Contents = append(m.Contents, Text(t))
	}
	return m
}

// TextContent joins the message's text parts.
func (m Message) TextContent() string {
	var s string
	for _, c := range m.Contents {
		if c.Type == ContentText {
			s += c.Text
		}
	}
	return s
}

// CallIDs returns the call ids of the message's function_call parts.
func (m Message) CallIDs() []string { return m.ids(ContentFunctionCall) }

// ResultIDs returns the call ids of the message's function_result parts.
func (m Message) ResultIDs() []string { return m.ids(ContentFunctionResult) }

func (m Message) ids(t ContentType) []string {
	var ids []string
	for _, c := range m.Contents {
		if c.Type == t {
			ids = append(ids, c.CallID)
		}
	}
	return ids
}
