package session

import "maps"

// Compaction is a summary that stands, in what a run sends the model, for
// the oldest messages of one slot's history, which stay stored as they
// were: removing the record (DeleteCompaction) undoes the compaction, and a
// run recomputes it when the history no longer starts with what it covers.
type Compaction struct {
	// Covers is how many messages, from the start of the history the
	// slot's provider serves (after a leading system message, which is
	// never summarised), the summary stands for.
	Covers int `json:"covers"`
	// SHA256 is the hex sha256 of those messages as JSON, without the
	// host's source stamps: a history that no longer starts with them
	// (cleared, forked earlier, served through a window) is not
	// summarised by this record.
	SHA256 string `json:"sha256"`
	// Summary is the model's summary of them.
	Summary string `json:"summary"`
}

// SetCompaction records c for key in a new Compactions map, as SetState
// does for State.
func (s *Session) SetCompaction(key string, c Compaction) {
	m := make(map[string]Compaction, len(s.Compactions)+1)
	maps.Copy(m, s.Compactions)
	m[key] = c
	s.Compactions = m
}

// DeleteCompaction removes the summary of key's history, in a new map:
// the next run sends the originals again (or summarises them anew when
// they exceed the agent's budget).
func (s *Session) DeleteCompaction(key string) {
	if _, ok := s.Compactions[key]; !ok {
		return
	}
	m := maps.Clone(s.Compactions)
	delete(m, key)
	if len(m) == 0 {
		m = nil
	}
	s.Compactions = m
}
