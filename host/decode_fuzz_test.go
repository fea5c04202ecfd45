package host

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/host/internal/statepatch"
)

// The decoders of plugin output must turn any bytes into either a value or
// ErrInvalidOutput, never a panic. The seeds run with every go test.

func checkDecodeErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		require.ErrorIs(t, err, ErrInvalidOutput, "a decode error must be ErrInvalidOutput")
	}
}

var outputSeeds = []string{
	`{}`, ``, `null`, `[]`, `{"state":null}`, `{"state":{},"state_patch":[{"op":"add","path":"/a","value":1}]}`,
	`{"messages":[{"role":"user","contents":[]}],"from_state":{"pointer":"/m"}}`,
	`{"from_state":{"pointer":"/messages","window":{"max_messages":-1}}}`,
	`{"state_patch":[{"op":"move","path":"/a"}]}`, `{"state_patch":[{"op":"add","path":"/a"}]}`,
	`{"messages":"x"}`, `{"messages":[1,2]}`, `{"next_cursor":5}`, "{\"state\":\"\xff\"}", `{"a":1}garbage`,
}

func FuzzDecodeDescribe(f *testing.F) {
	for _, s := range outputSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"name":"x","abi":"1.0","state_schema":{},"capabilities":["sql"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeInfo(b)
		checkDecodeErr(t, err)
	})
}

func FuzzDecodeProvide(f *testing.F) {
	for _, s := range outputSeeds {
		f.Add([]byte(s))
	}
	state := json.RawMessage(`{"messages":[{"role":"system","contents":[]},{"role":"user","contents":[{"type":"text","text":"a"}]}]}`)
	p := &Plugin{docs: statepatch.NewCache(4)}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeProvide(b)
		checkDecodeErr(t, err)
		if err != nil {
			return
		}
		if r.FromState != nil {
			_, _, err = p.selectFromState(abi.ExportProvide, state, statepatch.Claim{}, r.FromState, true)
			checkDecodeErr(t, err)
		}
		_, err = decodeMessages(context.Background(), abi.ExportProvide, "messages", r.Messages)
		checkDecodeErr(t, err)
	})
}

func FuzzDecodeStoreAndClear(f *testing.F) {
	for _, s := range outputSeeds {
		f.Add([]byte(s))
	}
	st, err := schema.Compile(json.RawMessage(`{"type":"object"}`), "fuzz")
	require.NoError(f, err)
	p := &Plugin{stateSchema: st, docs: statepatch.NewCache(4)}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, export := range []string{abi.ExportStore, abi.ExportClear} {
			c, err := decodeChange(export, b)
			checkDecodeErr(t, err)
			if err == nil {
				_, _, _, err = p.applyChange(t.Context(), export, json.RawMessage(`{"a":[1]}`), statepatch.Claim{}, c)
				checkDecodeErr(t, err)
			}
		}
	})
}

func FuzzDecodeList(f *testing.F) {
	for _, s := range outputSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeList(b)
		checkDecodeErr(t, err)
		if err == nil {
			_, err = decodeMessages(context.Background(), abi.ExportList, "messages", r.Messages)
			checkDecodeErr(t, err)
		}
	})
}

func FuzzDecodeMigrate(f *testing.F) {
	for _, s := range outputSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeMigrate(b)
		checkDecodeErr(t, err)
	})
}

// FuzzDecodeError covers what a plugin passes to error_set.
func FuzzDecodeError(f *testing.F) {
	for _, s := range []string{`{"code":"not_found","message":"x"}`, `{"code":"bogus"}`, `plain text`, ``, `{"code":5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e := abi.DecodeError(b)
		require.True(t, e.Code.Known(), "code %q escaped DecodeError", e.Code)
	})
}

// FuzzSelectPointer resolves arbitrary pointers in arbitrary documents, as
// a from_state selection does: never a panic, always a typed error.
func FuzzSelectPointer(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,{"c":2}]}}`), "/a/b/1/c")
	f.Add([]byte(`{"messages":[{"role":"user","contents":[]}]}`), "/messages")
	f.Add([]byte(`[1]`), "/9")
	f.Add([]byte(`"s"`), "/x")
	p := &Plugin{docs: statepatch.NewCache(4)}
	f.Fuzz(func(t *testing.T, doc []byte, ptr string) {
		_, _, err := p.selectFromState(abi.ExportProvide, doc, statepatch.Claim{}, &abi.StateSelection{Pointer: ptr}, true)
		checkDecodeErr(t, err)
	})
}
