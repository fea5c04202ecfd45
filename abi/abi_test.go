package abi

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		name         string
		in           string
		major, minor int
		wantErr      bool
	}{
		{name: "current", in: Version, major: Major, minor: Minor},
		{name: "future minor", in: "1.7", major: 1, minor: 7},
		{name: "no dot", in: "1", wantErr: true},
		{name: "negative", in: "1.-1", wantErr: true},
		{name: "words", in: "one.two", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			major, minor, err := ParseVersion(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, [2]int{tt.major, tt.minor}, [2]int{major, minor})
		})
	}
}

func TestMarkerMajor(t *testing.T) {
	tests := []struct {
		name   string
		export string
		major  int
		ok     bool
	}{
		{name: "v1", export: MarkerExport, major: 1, ok: true},
		{name: "v2", export: "wasmhist_abi_v2", major: 2, ok: true},
		{name: "no number", export: "wasmhist_abi_v", ok: false},
		{name: "other export", export: "provide", ok: false},
		{name: "suffix junk", export: "wasmhist_abi_v1x", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			major, ok := MarkerMajor(tt.export)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.major, major)
		})
	}
}

func TestDecodeError(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		code     Code
		sentinel error
	}{
		{name: "known code", in: `{"code":"not_found","message":"no such session"}`, code: CodeNotFound, sentinel: ErrNotFound},
		{name: "unknown code is internal", in: `{"code":"teapot","message":"x"}`, code: CodeInternal, sentinel: ErrInternal},
		{name: "plain text is internal", in: `boom`, code: CodeInternal, sentinel: ErrInternal},
		{name: "json without code is internal", in: `{"message":"x"}`, code: CodeInternal, sentinel: ErrInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := DecodeError([]byte(tt.in))
			require.Equal(t, tt.code, e.Code)
			require.ErrorIs(t, e, tt.sentinel)
			for _, other := range codeSentinels {
				if other != tt.sentinel {
					assert.NotErrorIs(t, e, other)
				}
			}
		})
	}
}

func TestAsErrorKeepsCodes(t *testing.T) {
	wrapped := errors.Join(errors.New("context"), Errorf(CodeUnavailable, "db down"))
	assert.Equal(t, CodeUnavailable, AsError(wrapped).Code, "AsError of a wrapped *Error")
	assert.Equal(t, CodeInvalidArgument, AsError(ErrInvalidArgument).Code, "AsError(ErrInvalidArgument)")
	assert.Equal(t, CodeInternal, AsError(errors.New("x")).Code, "AsError(plain)")
}

func TestMessageRoundTripKeepsUnknownParts(t *testing.T) {
	in := `{"role":"assistant","contents":[{"type":"text","text":"hi"},{"type":"function_call","call_id":"c1","name":"clock","arguments":{"tz":"UTC"}}],"additional_properties":{"x":1}}`
	var m Message
	require.NoError(t, json.Unmarshal([]byte(in), &m))
	assert.Equal(t, []string{"c1"}, m.CallIDs())
	assert.Equal(t, "hi", m.TextContent())
	out, err := json.Marshal(m)
	require.NoError(t, err)
	var back Message
	require.NoError(t, json.Unmarshal(out, &back))
	assert.JSONEq(t, "1", string(back.AdditionalProperties["x"]))
	assert.JSONEq(t, `{"tz":"UTC"}`, string(back.Contents[1].Arguments))
}
