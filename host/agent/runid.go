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

// repeated is what a run whose id the session recorded (session.RecentRuns)
// does instead of running as new.
type repeated struct {
	// replay, when set, is the result to return: the run committed, and
	// nothing runs.
	replay *RunResult
	// cont, when set, is the record of a run that stopped before it
	// finished with its last commit the session's revision: the run goes
	// on from there, without its input (stored already), answering the
	// calls it left open first.
	cont *session.RunRecord
	// prior is what the continued run had returned.
	prior []abi.Message
}

// lookupRun says what a run with opts.RunID does on s: nil for a run to go
// ahead as new (no run id, or one the window does not hold), else a replay
// or a continuation. The same id with another input is ErrRunIDReused.
func lookupRun(s *session.Session, input []abi.Message, opts *RunOptions) (*repeated, error) {
	if s == nil || opts == nil || opts.RunID == "" {
		return nil, nil
	}
	rec := s.FindRun(opts.RunID)
	if rec == nil {
		return nil, nil
	}
	if rec.InputSHA256 != "" && rec.InputSHA256 != inputDigest(input) {
		return nil, fmt.Errorf("agent: session %q: run %q: %w (committed at revision %d); send this input with a new run id",
			s.SessionID, opts.RunID, ErrRunIDReused, rec.Revision)
	}
	msgs, err := recordedReply(rec.Reply)
	if err != nil {
		return nil, fmt.Errorf("agent: session %q: run %q: %w: the recorded reply: %w", s.SessionID, opts.RunID, session.ErrInvalid, err)
	}
	if rec.Partial && rec.Revision == s.Revision && len(s.PendingToolCalls) > 0 {
		return &repeated{cont: rec, prior: msgs}, nil
	}
	return &repeated{replay: &RunResult{Replayed: true, Messages: msgs}}, nil
}

// continues makes r the continuation of the run rec records: its record
// keeps that run's input digest and begins with what it returned.
func (r *run) continues(rep *repeated) {
	if rep == nil || rep.cont == nil {
		return
	}
	r.inputSHA256 = rep.cont.InputSHA256
	r.prior = rep.prior
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
// save: its id, its input's digest, the revision, whether it finished and
// what it returned so far. A run without an id records nothing. r.mu must
// be held.
func (r *run) recordRun(next *session.Session) error {
	if r.runID == "" {
		return nil
	}
	msgs := concat(r.prior, r.reply)
	var reply json.RawMessage
	if len(msgs) > 0 {
		var err error
		if reply, err = json.Marshal(msgs); err != nil {
			return fmt.Errorf("agent: recording run %q: %w", r.runID, err)
		}
	}
	digest := r.inputSHA256
	if digest == "" {
		digest = inputDigest(r.input)
	}
	next.RecordRun(session.RunRecord{RunID: r.runID, InputSHA256: digest, Revision: next.Revision, Partial: !r.finished, Reply: reply})
	return nil
}
