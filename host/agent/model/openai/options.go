package openai

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3/option"
)

// DefaultBaseURL is the OpenAI API.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultModel is used when Options.Model is empty.
const DefaultModel = "gpt-4o-mini"

// Options configure a client. The zero value talks to the OpenAI API with
// DefaultModel, without a key and without retries.
type Options struct {
	// BaseURL of an OpenAI-compatible API, including the /v1 path, for
	// example http://localhost:11434/v1 for Ollama.
	BaseURL string
	// APIKey is sent as a bearer token when not empty.
	APIKey string
	// Model names the model to call.
	Model string
	// HTTPClient carries the requests; nil uses http.DefaultClient.
	HTTPClient *http.Client
	// MaxRetries is how often a request that failed transiently (429, 5xx,
	// connection error) is retried; 0 means never.
	MaxRetries int
}

func (o Options) requestOptions() []option.RequestOption {
	base := o.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(base),
		option.WithMaxRetries(o.MaxRetries),
	}
	if o.APIKey != "" {
		opts = append(opts, option.WithAPIKey(o.APIKey))
	}
	return opts
}

func (o Options) model() string {
	if o.Model == "" {
		return DefaultModel
	}
	return o.Model
}

var (
	// ErrNoConversations is returned by Chat for a request with a
	// ConversationID: Chat Completions keeps no conversation to continue.
	ErrNoConversations = errors.New("openai: chat completions cannot continue a conversation id")
	// ErrConversationNotFound matches an *APIError saying the conversation
	// or previous response to continue does not exist (or was not stored).
	ErrConversationNotFound = errors.New("openai: conversation not found")
	// ErrUnsupportedContent is returned for message parts the client
	// cannot send (media).
	ErrUnsupportedContent = errors.New("openai: unsupported content")
)

// APIError is an error answer from the service.
type APIError struct {
	// Op is the API that answered: "chat completions" or "responses".
	Op         string
	StatusCode int
	Type       string
	Code       string
	Param      string
	Message    string
	// Err is the SDK's error.
	Err error
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "openai: %s: %d %s", e.Op, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Param != "" {
		fmt.Fprintf(&b, " (param %s)", e.Param)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " [%s]", e.Code)
	}
	return b.String()
}

func (e *APIError) Unwrap() error { return e.Err }

// Is reports whether the error means a sentinel of this package.
func (e *APIError) Is(target error) bool {
	return target == ErrConversationNotFound &&
		(e.Code == "previous_response_not_found" ||
			(e.StatusCode == http.StatusNotFound && e.Param == "conversation"))
}
