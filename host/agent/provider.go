package agent

import (
	"context"

	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
)

// HistoryProvider is what the agent loop needs of a chat-history provider.
// Plugin.Provider returns one backed by a WebAssembly plugin; embedders and
// tests may implement it natively in Go.
//
// A provider keeps everything it knows about a session in that session's
// State[StateKey()]; it holds no per-session data itself, so one provider
// serves any number of sessions.
type HistoryProvider interface {
	// StateKey is the provider's slot in Session.State; unique per agent.
	StateKey() string
	// Provide returns the history to put before the request messages.
	Provide(ctx context.Context, s *session.Session, request []abi.Message) ([]abi.Message, error)
	// Store records new messages of a run (or of one model call).
	Store(ctx context.Context, s *session.Session, request, response []abi.Message) error
}
