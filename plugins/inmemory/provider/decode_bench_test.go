package provider

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkDecodeState measures what list does before it pages: splitting
// a state of 100 messages of about 500 bytes into the stored bytes of each.
func BenchmarkDecodeState(b *testing.B) {
	var s strings.Builder
	s.WriteString(`{"messages":[`)
	for i := range 100 {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString(`{"role":"user","message_id":"msg-` + strconv.Itoa(i) + `","created_at":"2026-11-21T10:00:00Z","contents":[{"type":"text","text":"message ` +
			strconv.Itoa(i) + `: ` + strings.Repeat("lorem ipsum dolor sit amet ", 15) + `\"quoted\"\n"}]}`)
	}
	s.WriteString(`]}`)
	state := json.RawMessage(s.String())
	b.SetBytes(int64(len(state)))
	b.ReportAllocs()
	for b.Loop() {
		msgs, err := stateMessages(state)
		if err != nil || len(msgs) != 100 {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeConfig measures the config read of every provide.
func BenchmarkDecodeConfig(b *testing.B) {
	config := json.RawMessage(`{"max_messages":20,"max_tokens":4000}`)
	b.ReportAllocs()
	for b.Loop() {
		cfg, err := parseConfig(config)
		if err != nil || cfg.MaxTokens != 4000 {
			b.Fatal(err)
		}
	}
}
