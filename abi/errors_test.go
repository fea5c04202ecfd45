package abi

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// TestDecodeErrorClipsTheMessage: a plugin's error message, or its
// unknown code, megabytes long and not even UTF-8, is cut to
// MaxErrorMessage bytes of valid UTF-8 with a note of what was left out.
func TestDecodeErrorClipsTheMessage(t *testing.T) {
	long := strings.Repeat("é", 3*MaxErrorMessage) + "\xff\xfe"
	for name, b := range map[string][]byte{
		"json":         []byte(`{"code":"not_found","message":"` + long + `"}`),
		"plain text":   []byte(long),
		"unknown code": []byte(`{"code":"` + strings.Repeat("c", 1<<20) + `","message":"m"}`),
	} {
		e := DecodeError(b)
		assert.LessOrEqual(t, len(e.Message), MaxErrorMessage+200, name)
		assert.True(t, utf8.ValidString(e.Message), name)
		assert.Contains(t, e.Message, "more bytes)", name)
	}
	short := DecodeError([]byte(`{"code":"not_found","message":"gone"}`))
	assert.Equal(t, "gone", short.Message)
	assert.Equal(t, CodeNotFound, short.Code)
}
