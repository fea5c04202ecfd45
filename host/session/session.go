// Package session holds a conversation's whole state as plain data: the
// Session value both the plugin runtime (package host) and the agent
// (package host/agent) work on, and its JSON codec checked against
// schemas/session.json. Nothing here runs a plugin or a model, so a session
// serializes, restores and moves between processes as data.
package session

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"

	"github.com/wasmhist/wasmhist/host/internal/bulk"
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
//
// A Session has value semantics: what you hold never changes under you.
// The host and the agent record a change by giving the session a new State
// map (SetState, DeleteState) holding new Data slices; they never write
// into a map or a byte slice a session already had. So a copy made by
// plain assignment (old := *s), a ProviderState read from State, or a Data
// slice stays exactly as it was, whatever runs on s next. Clone is still
// how to get an independent deep copy whose bytes you mean to edit
// yourself: editing a Data slice in place edits it for every copy that
// shares it.
type Session struct {
	SchemaVersion    int                      `json:"schema_version"`
	SessionID        string                   `json:"session_id"`
	ServiceSessionID string                   `json:"service_session_id,omitempty"`
	Revision         int64                    `json:"revision"`
	State            map[string]ProviderState `json:"state,omitempty"`
	// PendingToolCalls are the tool calls of the last committed model
	// response that no committed result answers: a run that persisted per
	// service call stopped between a call and the model call that would
	// have carried its result. The next run answers each one before its
	// input (package agent). Like State, the slice is replaced, never
	// written into.
	PendingToolCalls []PendingToolCall `json:"pending_tool_calls,omitempty"`
	// RecentRuns are the last MaxRecentRuns runs that committed with an
	// id (package agent's RunOptions.RunID), oldest first, each with a
	// digest of its input and, within MaxRecentReplyBytes, its reply: a
	// run repeated after a crash or a lost answer is recognised and
	// answered with what it committed instead of being stored twice.
	// Written with RecordRun; like State, the slice is replaced, never
	// written into.
	RecentRuns []RunRecord `json:"recent_runs,omitempty"`
	// Provenance records, by state key, which build of which plugin last
	// committed the slot and the storage it was granted, so that a resume
	// against another database or another build can be refused (package
	// agent). Optional: a slot without an entry is resumed by anything.
	// Like State, the map is replaced, never written into.
	Provenance map[string]Provenance `json:"provenance,omitempty"`
	// Compactions hold, by state key, a summary that stands for the oldest
	// messages of the slot's history in what runs send the model, the
	// messages themselves staying stored (package agent's
	// Config.Compaction). Like State, the map is replaced, never written
	// into.
	Compactions map[string]Compaction `json:"compactions,omitempty"`
}

// Provenance is where one slot's history is: the plugin build that wrote
// it and the storage that build was granted. It never holds a secret: the
// storage is a grant's target name (for example "sqlite:/abs/path.db" or
// "postgres:NAME"), not a connection string.
type Provenance struct {
	// Plugin is the plugin's name (PluginInfo.Name).
	Plugin string `json:"plugin"`
	// Version is the plugin's version (PluginInfo.Version).
	Version string `json:"version,omitempty"`
	// SHA256 is the hex sha256 of the plugin's WebAssembly bytes; empty
	// for a native plugin.
	SHA256 string `json:"sha256,omitempty"`
	// Storage names what the plugin was granted; empty when nothing.
	Storage string `json:"storage,omitempty"`
	// Session is the id of the session whose history Storage holds,
	// recorded with Storage: a copy of the session under another id
	// (Clone, then a new SessionID) would share those rows, and package
	// agent refuses to run it.
	Session string `json:"session,omitempty"`
	// Revision is the revision of the last commit that wrote into
	// Storage: the storage holds the session at that revision (its
	// session row or journal row), which is how a session moved or
	// restored together with its database is recognised (package agent).
	Revision int64 `json:"revision,omitempty"`
}

// PendingToolCall is one tool call a committed model response asked for
// that no committed result answers yet.
type PendingToolCall struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Done reports that the tool ran before the run stopped; Result or
	// Error is then what it returned, the truth of what happened, to be
	// sent to the model as is.
	Done   bool            `json:"done,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	// AwaitsApproval reports a call whose tool needs a person's approval
	// (package agent's Tool.NeedsApproval): it runs only once a later run
	// carries the decision, and a denial is sent as its error.
	AwaitsApproval bool `json:"awaits_approval,omitempty"`
}

// ProviderState is one provider's slot in a session. It is a value: the
// host never writes into Data once it is in a session, so a ProviderState
// you read stays as it was.
type ProviderState struct {
	// Provider names the plugin that owns the slot (PluginInfo.Name).
	Provider string `json:"provider"`
	// StateVersion is the plugin's state_version when Data was written.
	StateVersion int `json:"state_version"`
	// Data is the plugin's state, valid against its state_schema.
	Data json.RawMessage `json:"data"`
}

// Clone returns a deep copy: its own State map and its own Data bytes,
// which the caller may edit without affecting s or any copy of s. It
// copies the session, not the history a database plugin keeps for it in
// its storage: a clone given another SessionID would write into the same
// rows as s, so package agent refuses to run a clone whose Provenance
// records storage of another session id (agent.ErrProviderMismatch).
// Package host/conversation's Fork copies a session with its history.
func (s *Session) Clone() *Session {
	c := *s
	if s.State != nil {
		c.State = make(map[string]ProviderState, len(s.State))
		for k, v := range s.State {
			v.Data = bulk.Clone(v.Data)
			c.State[k] = v
		}
	}
	c.Provenance = maps.Clone(s.Provenance)
	c.Compactions = maps.Clone(s.Compactions)
	if s.RecentRuns != nil {
		c.RecentRuns = make([]RunRecord, len(s.RecentRuns))
		for i, r := range s.RecentRuns {
			r.Reply = bytes.Clone(r.Reply)
			c.RecentRuns[i] = r
		}
	}
	if s.PendingToolCalls != nil {
		c.PendingToolCalls = make([]PendingToolCall, len(s.PendingToolCalls))
		for i, p := range s.PendingToolCalls {
			p.Arguments = bytes.Clone(p.Arguments)
			p.Result = bytes.Clone(p.Result)
			c.PendingToolCalls[i] = p
		}
	}
	return &c
}

// SetState records ps as the slot for key in a new State map, leaving the
// map s had (which copies of s may share) unchanged. It copies the map,
// not the states: O(slots), whatever their size.
func (s *Session) SetState(key string, ps ProviderState) {
	m := make(map[string]ProviderState, len(s.State)+1)
	maps.Copy(m, s.State)
	m[key] = ps
	s.State = m
}

// DeleteState removes the slot for key, in a new State map as SetState
// does.
func (s *Session) DeleteState(key string) {
	if _, ok := s.State[key]; !ok {
		return
	}
	m := make(map[string]ProviderState, len(s.State))
	for k, v := range s.State {
		if k != key {
			m[k] = v
		}
	}
	s.State = m
}

// SetProvenance records p for key in a new Provenance map, as SetState
// does for State.
func (s *Session) SetProvenance(key string, p Provenance) {
	m := make(map[string]Provenance, len(s.Provenance)+1)
	maps.Copy(m, s.Provenance)
	m[key] = p
	s.Provenance = m
}

// New returns an empty session with a random id.
func New() *Session {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &Session{SchemaVersion: SchemaVersion, SessionID: hex.EncodeToString(b[:])}
}
