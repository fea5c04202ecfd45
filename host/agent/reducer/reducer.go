// Package reducer bounds a chat history so it fits a model's context: a
// window of the newest N messages, or of the newest messages whose estimated
// tokens fit a budget.
//
// Every reduction keeps the history valid for OpenAI-compatible services,
// which reject an assistant tool call that is not followed by its results and
// a tool result that has no call before it:
//
//   - an assistant message with function_call parts and the tool messages
//     carrying its function_result parts are one group, kept or dropped whole;
//   - a leading system message is always kept (it counts against the bound);
//   - the newest messages are kept, contiguously: once a group does not fit,
//     nothing older is kept, so the window never has holes;
//   - a tool result whose call is not in the window is dropped rather than
//     kept alone at the cut edge.
//
// The host applies the same rules to abi.Window selections returned by
// plugins, so a plugin's window and a configured reducer agree.
package reducer

import (
	"context"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/window"
)

// Reducer shrinks a history before it reaches a model. Implementations must
// not modify msgs and must be safe for concurrent use.
type Reducer interface {
	Reduce(ctx context.Context, msgs []abi.Message) ([]abi.Message, error)
}

// MessageWindow keeps at most Max messages (the leading system message
// included). Max <= 0 keeps everything.
type MessageWindow struct {
	Max int
}

// Reduce implements Reducer.
func (w MessageWindow) Reduce(_ context.Context, msgs []abi.Message) ([]abi.Message, error) {
	return window.Keep(msgs, w.Max, 0, EstimateTokens), nil
}

// TokenWindow keeps the newest messages whose estimated tokens, the leading
// system message's included, add up to at most MaxTokens. MaxTokens <= 0
// keeps everything. Estimate defaults to EstimateTokens; set it to a real
// tokenizer's count when one is at hand.
type TokenWindow struct {
	MaxTokens int
	Estimate  func(abi.Message) int
}

// Reduce implements Reducer.
func (w TokenWindow) Reduce(_ context.Context, msgs []abi.Message) ([]abi.Message, error) {
	est := w.Estimate
	if est == nil {
		est = EstimateTokens
	}
	return window.Keep(msgs, 0, w.MaxTokens, est), nil
}

// ApplyWindow reduces msgs to w with the rules in the package documentation,
// estimating tokens with EstimateTokens. A zero Window keeps everything. The
// result may share elements with msgs but never aliases its backing array.
func ApplyWindow(msgs []abi.Message, w abi.Window) []abi.Message {
	return window.Apply(msgs, w)
}

// EstimateTokens is a cheap, tokenizer-free estimate of what a message costs
// in a model's context: 4 tokens of overhead, plus one token per 4 bytes
// (rounded up) of text, reasoning, function names, arguments, results and
// errors, plus 85 tokens per data or uri part. It over-counts English prose
// slightly, which errs on the side of fitting the context.
func EstimateTokens(m abi.Message) int { return window.EstimateTokens(m) }
