package sql

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkDecodeResponse measures decoding a query's answer of 100 rows of
// (seq, role, body), the body a message of about 500 bytes sent as JSON
// (QueryJSON), as the sqlite plugin's provide reads them.
func BenchmarkDecodeResponse(b *testing.B) {
	var s strings.Builder
	s.WriteString(`{"results":[{"columns":["seq","role","body"],"rows":[`)
	for i := range 100 {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString(`[` + strconv.Itoa(i) + `,"user",{"role":"user","message_id":"msg-` + strconv.Itoa(i) + `","contents":[{"type":"text","text":"message ` +
			strconv.Itoa(i) + `: ` + strings.Repeat("lorem ipsum dolor sit amet ", 15) + `\"quoted\"\n"}]}]`)
	}
	s.WriteString(`]}]}`)
	in := []byte(s.String())
	resp, err := decodeResponse(in, false, 0) // checked once, outside the timed loop
	require.NoError(b, err)
	require.Len(b, resp.Results[0].Rows, 100)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeResponse(in, false, 0); err != nil {
			b.Fatal(err)
		}
	}
}
