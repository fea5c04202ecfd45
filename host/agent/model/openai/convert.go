package openai

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"

	"github.com/wasmhist/wasmhist/abi"
)

// resultOutput is what the service sees of a function_result.
func resultOutput(c abi.Content) string {
	if c.Error != "" {
		return "error: " + c.Error
	}
	var s string
	if json.Unmarshal(c.Result, &s) == nil {
		return s
	}
	if len(c.Result) == 0 {
		return "null"
	}
	return string(c.Result)
}

// callArguments keeps function_call arguments valid JSON: a model that emits
// broken JSON gets it back as a JSON string, so the message still encodes
// and the tool reports a clear argument error instead of the loop failing.
func callArguments(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// checkContent refuses parts the client cannot send.
func checkContent(i int, m abi.Message) error {
	for _, c := range m.Contents {
		switch c.Type {
		case abi.ContentData, abi.ContentURI:
			return fmt.Errorf("message %d (%s): %s part: %w", i, m.Role, c.Type, ErrUnsupportedContent)
		}
	}
	return nil
}

// toolParameters decodes a tool's JSON Schema; an empty schema means an
// object without properties, which every compatible server accepts.
func toolParameters(name string, raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("tool %s: parameters: %w", name, err)
	}
	return m, nil
}

func usage(in, out, total int64) *abi.Usage {
	if in == 0 && out == 0 && total == 0 {
		return nil
	}
	return &abi.Usage{InputTokens: in, OutputTokens: out, TotalTokens: total}
}

// apiError turns an SDK error into an *APIError with the service's message,
// and wraps anything else with the operation.
func apiError(op string, err error) error {
	var oe *openai.Error
	if errors.As(err, &oe) {
		return &APIError{
			Op: op, StatusCode: oe.StatusCode, Type: oe.Type, Code: oe.Code,
			Param: oe.Param, Message: oe.Message, Err: err,
		}
	}
	return fmt.Errorf("openai: %s: %w", op, err)
}
