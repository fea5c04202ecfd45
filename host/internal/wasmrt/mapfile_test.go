package wasmrt

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMapFile: mapFile gives a file's bytes, an empty file's too, and an
// error for a file that is not there.
func TestMapFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"a few bytes", []byte("a skeleton")},
		{"pages and a part", make([]byte, 3*65536+17)},
		{"empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			for i := range tc.b {
				tc.b[i] = byte(i * 7)
			}
			require.NoError(t, os.WriteFile(path, tc.b, 0o600))
			b, release, err := mapFile(path)
			require.NoError(t, err)
			require.Equal(t, len(tc.b), len(b))
			require.Equal(t, string(tc.b), string(b))
			release()
		})
	}
	_, _, err := mapFile(filepath.Join(dir, "absent"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
