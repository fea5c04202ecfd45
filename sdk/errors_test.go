package sdk

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wasmhist/wasmhist/abi"
)

// TestWrap checks Wrap reads and matches as the fmt.Errorf it replaces.
func TestWrap(t *testing.T) {
	cause := errors.New("cause")
	coded := &abi.Error{Code: abi.CodeNotFound, Message: "no row"}
	tests := []struct {
		name string
		got  error
		fmt  error
	}{
		{"one error", Wrap("sqlite: provide", coded), fmt.Errorf("sqlite: provide: %w", coded)},
		{"a sentinel and a cause", Wrap("sdk: decode state", abi.ErrInvalidArgument, cause), fmt.Errorf("sdk: decode state: %w: %w", abi.ErrInvalidArgument, cause)},
		{"nested", Wrap("outer", Wrap("inner", cause)), fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", cause))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.fmt.Error(), tt.got.Error())
			for _, target := range []error{cause, coded, abi.ErrInvalidArgument, abi.ErrNotFound} {
				assert.Equal(t, errors.Is(tt.fmt, target), errors.Is(tt.got, target), "errors.Is %v", target)
			}
			assert.Equal(t, errors.Unwrap(tt.fmt) == nil, errors.Unwrap(tt.got) == nil, "errors.Unwrap")
			assert.Equal(t, abi.AsError(tt.fmt), abi.AsError(tt.got), "what crosses to the host")
		})
	}
}
