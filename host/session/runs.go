package session

import (
	"encoding/json"
	"fmt"
)

// The bounds of Session.RecentRuns, checked by Decode and Encode and kept
// by RecordRun (RATIONALE.md: "Why a window of 64 run ids?").
const (
	// MaxRecentRuns is how many run ids a session remembers: a run
	// repeated after MaxRecentRuns later runs committed is not recognised.
	MaxRecentRuns = 64
	// MaxRecentReplyBytes bounds the replies the window keeps, together
	// (their JSON). The newest replies are kept; an older one that no
	// longer fits is dropped (RunRecord.ReplyDropped) while its id and
	// digest stay.
	MaxRecentReplyBytes = 64 << 10
)

// RunRecord is one run of Session.RecentRuns.
type RunRecord struct {
	// RunID is the caller's id of the run.
	RunID string `json:"run_id"`
	// InputSHA256 is the hex sha256 of the run's input messages (package
	// agent defines their encoding), so that a run id repeated with
	// another input is told apart from a repeat; empty when the input is
	// not known (a run read from a session's last_run_id).
	InputSHA256 string `json:"input_sha256"`
	// Revision is the revision the run's last commit made.
	Revision int64 `json:"revision"`
	// Partial reports a run that stopped before it finished (a model call
	// failed after earlier calls committed, or a streaming consumer
	// stopped): its commits hold part of its turn, and Reply what it had
	// returned up to its last commit.
	Partial bool `json:"partial,omitempty"`
	// Reply is what the run returned (a JSON array of messages), to be
	// returned again to a caller that repeats the run; absent when
	// ReplyDropped.
	Reply json.RawMessage `json:"reply,omitempty"`
	// ReplyDropped reports a reply that did not fit in
	// MaxRecentReplyBytes with the newer ones.
	ReplyDropped bool `json:"reply_dropped,omitempty"`
}

// FindRun returns the record of run id, or nil.
func (s *Session) FindRun(id string) *RunRecord {
	for i := range s.RecentRuns {
		if s.RecentRuns[i].RunID == id {
			r := s.RecentRuns[i]
			return &r
		}
	}
	return nil
}

// RecordRun records rec as the newest run, in a new RecentRuns slice (as
// SetState does for State): an earlier record of the same id is replaced,
// the oldest records beyond MaxRecentRuns are forgotten, and the replies
// that do not fit in MaxRecentReplyBytes, newest first, are dropped.
func (s *Session) RecordRun(rec RunRecord) {
	runs := make([]RunRecord, 0, min(len(s.RecentRuns)+1, MaxRecentRuns))
	for _, r := range s.RecentRuns {
		if r.RunID != rec.RunID {
			runs = append(runs, r)
		}
	}
	runs = append(runs, rec)
	if n := len(runs) - MaxRecentRuns; n > 0 {
		runs = runs[n:]
	}
	budget := MaxRecentReplyBytes
	for i := len(runs) - 1; i >= 0; i-- {
		if n := len(runs[i].Reply); n > budget {
			runs[i].Reply, runs[i].ReplyDropped = nil, true
		} else {
			budget -= n
		}
	}
	s.RecentRuns = runs
}

// readLastRunID reads the last_run_id that sessions written before
// recent_runs hold, as the newest run, its input and reply not known, so
// that such a session still loads and its last run is still recognised.
// Encode never writes it.
func (s *Session) readLastRunID(data []byte) error {
	var legacy struct {
		LastRunID string `json:"last_run_id"`
	}
	if err := json.Unmarshal(data, &legacy); err != nil || legacy.LastRunID == "" || s.FindRun(legacy.LastRunID) != nil {
		return err
	}
	if s.Revision < 1 {
		return fmt.Errorf("at /last_run_id: a run committed at revision %d", s.Revision)
	}
	s.RecordRun(RunRecord{RunID: legacy.LastRunID, Revision: s.Revision, ReplyDropped: true})
	return nil
}

// checkRuns checks what session.json cannot say: each run id once, and
// the replies within MaxRecentReplyBytes together.
func checkRuns(runs []RunRecord) error {
	seen := make(map[string]bool, len(runs))
	total := 0
	for i, r := range runs {
		if seen[r.RunID] {
			return fmt.Errorf("at /recent_runs/%d: run id %q recorded twice", i, r.RunID)
		}
		seen[r.RunID] = true
		total += len(r.Reply)
	}
	if total > MaxRecentReplyBytes {
		return fmt.Errorf("at /recent_runs: replies of %d bytes together, at most %d", total, MaxRecentReplyBytes)
	}
	return nil
}
