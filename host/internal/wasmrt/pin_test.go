package wasmrt

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/modpin"
)

// TestPinGoSDKErrorText pins what Instance.Call relies on to tell a
// plugin-reported error from a trap: the go-sdk returns the text the plugin
// gave error_set as the call's error, verbatim, and GetError returns the
// same text. If an upgrade wraps or rewrites it, every plugin error would
// turn into ErrTrap.
func TestPinGoSDKErrorText(t *testing.T) {
	const dep = "github.com/extism/go-sdk"
	version, err := modpin.Version(".", dep)
	require.NoError(t, err)
	m := compileHostile(t, "misbehave")
	ctx := context.Background()
	in, err := m.NewInstance(ctx, testPages)
	require.NoError(t, err)
	defer in.Close(ctx)
	_, _, err = in.plugin.Call(abi.ExportDescribe, nil)
	require.NoError(t, err)
	rc, _, err := in.plugin.CallWithContext(ctx, abi.ExportProvide, []byte(`{"x":"hostile:error"}`))
	require.Error(t, err, "%s %s: a plugin's error_set no longer fails the call", dep, version)
	require.NotZero(t, rc)
	msg := in.plugin.GetError()
	require.NotEmpty(t, msg, "%s %s: GetError no longer returns the plugin's error_set text", dep, version)
	require.Equal(t, msg, err.Error(), "%s %s: the call's error is no longer the plugin's error_set text verbatim; update the matching in instance.go", dep, version)
	require.ErrorIs(t, abi.DecodeError([]byte(msg)), abi.ErrNotFound, "%s %s: the error_set text no longer decodes as the plugin's error", dep, version)
}
