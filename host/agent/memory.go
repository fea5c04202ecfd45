package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
)

// MemoryProviderName is the session.ProviderState.Provider of a MemoryProvider.
const MemoryProviderName = "memory"

// MemoryProvider is a native HistoryProvider that keeps the whole history
// in the session's state, as {"messages": [...]}. It suits tests and
// embedders who persist sessions themselves; its state travels with the
// session like any plugin's.
type MemoryProvider struct{ key string }

var _ HistoryProvider = (*MemoryProvider)(nil)

// NewMemoryProvider returns a provider that keeps its history under
// stateKey. Two MemoryProviders with different keys on one agent (a primary
// and an audit copy) keep separate histories.
func NewMemoryProvider(stateKey string) *MemoryProvider { return &MemoryProvider{key: stateKey} }

type memoryState struct {
	Messages []abi.Message `json:"messages"`
}

// StateKey implements HistoryProvider.
func (p *MemoryProvider) StateKey() string { return p.key }

// Provide implements HistoryProvider: it returns every stored message.
func (p *MemoryProvider) Provide(_ context.Context, s *session.Session, _ []abi.Message) ([]abi.Message, error) {
	return p.Messages(s)
}

// Store implements HistoryProvider: it appends request then response.
func (p *MemoryProvider) Store(_ context.Context, s *session.Session, request, response []abi.Message) error {
	st, err := p.load(s)
	if err != nil {
		return err
	}
	for _, m := range concat(request, response) {
		// Where a message came from matters only within the run that
		// sent it; a loaded message is re-stamped as history.
		m.Source = nil
		st.Messages = append(st.Messages, m)
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("memory provider %q: %w", p.key, err)
	}
	s.SetState(p.key, session.ProviderState{Provider: MemoryProviderName, StateVersion: 1, Data: data})
	return nil
}

// Messages returns the stored history of session s.
func (p *MemoryProvider) Messages(s *session.Session) ([]abi.Message, error) {
	st, err := p.load(s)
	if err != nil {
		return nil, err
	}
	return st.Messages, nil
}

// Clear forgets the stored history of session s. Other providers' state is
// untouched.
func (p *MemoryProvider) Clear(_ context.Context, s *session.Session) error {
	s.DeleteState(p.key)
	return nil
}

func (p *MemoryProvider) load(s *session.Session) (memoryState, error) {
	var st memoryState
	ps, ok := s.State[p.key]
	if !ok || len(ps.Data) == 0 {
		return st, nil
	}
	if ps.Provider != MemoryProviderName {
		return st, fmt.Errorf("memory provider %q: state belongs to provider %q", p.key, ps.Provider)
	}
	if err := json.Unmarshal(ps.Data, &st); err != nil {
		return st, fmt.Errorf("memory provider %q: decoding state: %w", p.key, err)
	}
	return st, nil
}
