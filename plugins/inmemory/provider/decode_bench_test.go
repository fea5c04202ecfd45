package provider

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
	msgs, err := stateMessages(state) // checked once, outside the timed loop
	require.NoError(b, err)
	require.Len(b, msgs, 100)
	b.SetBytes(int64(len(state)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := stateMessages(state); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeConfig measures the config read of every provide.
func BenchmarkDecodeConfig(b *testing.B) {
	config := json.RawMessage(`{"max_messages":20,"max_tokens":4000}`)
	cfg, err := parseConfig(config) // checked once, outside the timed loop
	require.NoError(b, err)
	require.Equal(b, Config{MaxMessages: 20, MaxTokens: 4000}, cfg)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseConfig(config); err != nil {
			b.Fatal(err)
		}
	}
}
