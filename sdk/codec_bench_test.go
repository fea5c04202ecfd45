package sdk

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

// benchMessages returns n messages of about 500 bytes of JSON, joined by
// commas, as they sit in a request or a state.
func benchMessages(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","message_id":"msg-` + strconv.Itoa(i) + `","created_at":"2026-11-21T10:00:00Z","contents":[{"type":"text","text":"message ` +
			strconv.Itoa(i) + `: ` + strings.Repeat("lorem ipsum dolor sit amet ", 15) + `\"quoted\"\n"}]}`)
	}
	return b.String()
}

// BenchmarkDecodeRequest measures the request decoders natively, without
// the WebAssembly runtime around them: store of one turn (two messages of
// about 500 bytes, what every turn sends) and list over a state of 100
// messages (the largest document the guest reads).
func BenchmarkDecodeRequest(b *testing.B) {
	store := []byte(`{"session":{"session_id":"s","state_key":"k"},"request_messages":[` + benchMessages(1) + `],"response_messages":[` + benchMessages(1) + `]}`)
	list := []byte(`{"session":{"session_id":"s","state_key":"k"},"state":{"messages":[` + benchMessages(100) + `]},"config":{"max_messages":10},"cursor":"20","limit":50}`)
	// Each decodes once, checked, before the timed loop; the loop itself
	// pays for no assertion machinery.
	b.Run("store", func(b *testing.B) {
		var req abi.StoreRequest
		require.NoError(b, decodeStoreRequest(store, &req, nil, nil))
		require.Len(b, req.ResponseMessages, 1)
		b.SetBytes(int64(len(store)))
		b.ReportAllocs()
		for b.Loop() {
			var req abi.StoreRequest
			if err := decodeStoreRequest(store, &req, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list/messages=100", func(b *testing.B) {
		var req abi.ListRequest
		require.NoError(b, decodeListRequest(list, &req, nil))
		require.Equal(b, 50, req.Limit)
		b.SetBytes(int64(len(list)))
		b.ReportAllocs()
		for b.Loop() {
			var req abi.ListRequest
			if err := decodeListRequest(list, &req, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
