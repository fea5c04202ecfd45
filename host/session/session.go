// Package session holds a conversation's whole state as plain data: the
// Session value both the plugin runtime (package host) and the agent
// (package host/agent) work on, and its JSON codec checked against
// schemas/session.json. Nothing here runs a plugin or a model, so a session
// serializes, restores and moves between processes as data.
package session

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
)

// SchemaVersion is the version of the session layout this host writes.
const SchemaVersion = 1

// Session is one conversation's whole state as plain data: any JSON library
// can round-trip it, and restoring it needs no agent, plugin or factory.
//
// State holds one entry per provider state key. Two providers of the same
// plugin (a primary and an audit copy) have different keys and never see
// each other's data. Revision counts committed changes; a session store uses
// it to refuse a stale write.
type Session struct {
	SchemaVersion    int                      `json:"schema_version"`
	SessionID        string                   `json:"session_id"`
	ServiceSessionID string                   `json:"service_session_id,omitempty"`
	Revision         int64                    `json:"revision"`
	State            map[string]ProviderState `json:"state,omitempty"`
}

// ProviderState is one provider's slot in a session.
type ProviderState struct {
	// Provider names the plugin that owns the slot (PluginInfo.Name).
	Provider string `json:"provider"`
	// StateVersion is the plugin's state_version when Data was written.
	StateVersion int `json:"state_version"`
	// Data is the plugin's state, valid against its state_schema.
	Data json.RawMessage `json:"data"`
}

// Clone returns a deep copy, so a run can work on a copy and commit it only
// when the run succeeds.
func (s *Session) Clone() *Session {
	c := *s
	if s.State != nil {
		c.State = make(map[string]ProviderState, len(s.State))
		for k, v := range s.State {
			v.Data = append(json.RawMessage(nil), v.Data...)
			c.State[k] = v
		}
	}
	return &c
}

// New returns an empty session with a random id.
func New() *Session {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &Session{SchemaVersion: SchemaVersion, SessionID: hex.EncodeToString(b[:])}
}
