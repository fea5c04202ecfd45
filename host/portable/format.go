package portable

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/schemas"
)

// FormatVersion is the layout this package writes (MAJOR.MINOR). A
// Reader reads every minor of FormatMajor and refuses any other major.
const FormatVersion = "1.0"

// FormatMajor is the major format version this package reads.
const FormatMajor = 1

// Members of the document, in the order they are written and read
// (schemas/portable-session.json). Their order is also their alphabetical
// order, so a document written by a library that sorts keys reads too.
const (
	memberVersion  = "format_version"
	memberSession  = "session"
	memberSlots    = "slots"
	memberTotals   = "totals"
	memberKey      = "key"
	memberPlugin   = "plugin"
	memberPVersion = "plugin_version"
	memberMessages = "stored_messages"
)

// Slot is one state slot of a document: its state key and the plugin that
// held it.
type Slot struct {
	// Key is the slot's state key (Session.State's key).
	Key string `json:"key"`
	// Plugin is the name of the plugin that held the slot.
	Plugin string `json:"plugin"`
	// PluginVersion is its version, when known.
	PluginVersion string `json:"plugin_version,omitempty"`
}

// SlotsOf returns the slots a document of s holds, sorted by key: one per
// state key, its plugin the slot's provider and its version the one
// s.Provenance records (empty when it records none).
func SlotsOf(s *session.Session) []Slot {
	out := make([]Slot, 0, len(s.State))
	for k, ps := range s.State {
		out = append(out, Slot{Key: k, Plugin: ps.Provider, PluginVersion: s.Provenance[k].Version})
	}
	slices.SortFunc(out, func(a, b Slot) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out
}

// docSession is the document's session member: session.Session without
// State, which an import rebuilds from the slots.
type docSession struct {
	SessionID        string                        `json:"session_id"`
	ServiceSessionID string                        `json:"service_session_id,omitempty"`
	Revision         int64                         `json:"revision"`
	PendingToolCalls []session.PendingToolCall     `json:"pending_tool_calls,omitempty"`
	RecentRuns       []session.RunRecord           `json:"recent_runs,omitempty"`
	Provenance       map[string]session.Provenance `json:"provenance,omitempty"`
	Compactions      map[string]session.Compaction `json:"compactions,omitempty"`
}

func fromSession(s *session.Session) docSession {
	return docSession{
		SessionID: s.SessionID, ServiceSessionID: s.ServiceSessionID, Revision: s.Revision,
		PendingToolCalls: s.PendingToolCalls, RecentRuns: s.RecentRuns, Provenance: s.Provenance,
		Compactions: s.Compactions,
	}
}

// toSession checks d by the session's own rules (session.Decode: the
// recent runs' bounds, the revision's) and returns it as a session
// without state.
func (d docSession) toSession() (*session.Session, error) {
	s := &session.Session{
		SchemaVersion: session.SchemaVersion, SessionID: d.SessionID, ServiceSessionID: d.ServiceSessionID,
		Revision: d.Revision, PendingToolCalls: d.PendingToolCalls, RecentRuns: d.RecentRuns, Provenance: d.Provenance,
		Compactions: d.Compactions,
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return session.Decode(b)
}

type totals struct {
	Slots    int64 `json:"slots"`
	Messages int64 `json:"messages"`
}

// Compiled on first use, not by every process that links the package.
var versionPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})$`) })

// checkVersion accepts any MAJOR.MINOR whose major is FormatMajor.
func checkVersion(v string) error {
	m := versionPattern().FindStringSubmatch(v)
	if m == nil {
		return fmt.Errorf("%w: format_version %q is not MAJOR.MINOR", ErrMalformed, v)
	}
	major, _ := strconv.Atoi(m[1])
	if major != FormatMajor {
		return fmt.Errorf("%w: the document is format %s, this package reads %d.x", ErrVersion, v, FormatMajor)
	}
	return nil
}

// sessionSchema checks the session member, so that its errors point into
// the document.
var sessionSchema = sync.OnceValue(func() *schema.Schema {
	s, err := schema.Compile(json.RawMessage(`{"$ref": "`+schemas.ID(schemas.PortableSession)+`#/$defs/session"}`), "portable-session.json session")
	if err != nil {
		panic("portable: compiling the embedded session schema: " + err.Error()) // checked by the tests
	}
	return s
})

func messageSchema() *schema.Schema { return schema.Project(schemas.Message) }
