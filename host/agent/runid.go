package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/schemas"
)

// ErrRunIDReused reports a run whose RunOptions.RunID the session recorded
// for a run with another input: the id names that run, and this input
// needs an id of its own.
var ErrRunIDReused = errors.New("agent: run id already used for another input")

// inputDigest is the hex sha256 of the run's input messages as the run
// sees them (a message without a source stamped external), encoded by
// encoding/json: the same input always has the same digest.
func inputDigest(input []abi.Message) string {
	stamped := make([]abi.Message, len(input))
	for i, m := range input {
		if m.Source == nil {
			m.Source = &abi.Source{Type: abi.SourceExternal}
		}
		stamped[i] = m
	}
	b, err := json.Marshal(stamped)
	if err != nil {
		// A message that does not encode cannot be stored either; its
		// digest matches nothing recorded, so the run goes on and fails
		// where it stores.
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// replay answers a run the session recorded (session.RecentRuns) with what
// it returned, without running anything. It returns nil, nil for a run to
// go ahead: no run id, an id the window does not hold, or the run whose
// commit made the current revision and left tool calls open (it runs
// again, answering them first, as after any run stopped between a call
// and its result).
func replay(s *session.Session, input []abi.Message, opts *RunOptions) (*RunResult, error) {
	if s == nil || opts == nil || opts.RunID == "" {
		return nil, nil
	}
	rec := s.FindRun(opts.RunID)
	if rec == nil {
		return nil, nil
	}
	if rec.InputSHA256 != inputDigest(input) {
		return nil, fmt.Errorf("agent: session %q: run %q: %w (committed at revision %d); send this input with a new run id",
			s.SessionID, opts.RunID, ErrRunIDReused, rec.Revision)
	}
	if rec.Revision == s.Revision && len(s.PendingToolCalls) > 0 {
		return nil, nil
	}
	msgs, err := recordedReply(rec.Reply)
	if err != nil {
		return nil, fmt.Errorf("agent: session %q: run %q: %w: the recorded reply: %w", s.SessionID, opts.RunID, session.ErrInvalid, err)
	}
	return &RunResult{Replayed: true, Messages: msgs}, nil
}

// recordedReply decodes a recorded reply, each message checked against
// schemas/message.json here rather than on every load and save of the
// session (RATIONALE.md: "Why a window of 64 run ids?").
func recordedReply(reply json.RawMessage) ([]abi.Message, error) {
	if len(reply) == 0 {
		return nil, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(reply, &raws); err != nil {
		return nil, err
	}
	ms := schema.Project(schemas.Message)
	msgs := make([]abi.Message, len(raws))
	for i, raw := range raws {
		if err := ms.Validate(raw); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if err := json.Unmarshal(raw, &msgs[i]); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	return msgs, nil
}

// recordRun records the run in next, the session a commit is about to
// save: its id, its input's digest, the revision and what it returned so
// far (r.reply). A run without an id records nothing. r.mu must be held.
func (r *run) recordRun(next *session.Session) error {
	if r.runID == "" {
		return nil
	}
	reply, err := json.Marshal(r.reply)
	if err != nil {
		return fmt.Errorf("agent: recording run %q: %w", r.runID, err)
	}
	if len(r.reply) == 0 {
		reply = nil
	}
	next.RecordRun(session.RunRecord{RunID: r.runID, InputSHA256: inputDigest(r.input), Revision: next.Revision, Reply: reply})
	return nil
}
