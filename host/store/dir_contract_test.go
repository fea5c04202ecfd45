package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/store"
	"github.com/wasmhist/wasmhist/host/store/storetest"
)

// Each handle is a Dir of its own on one directory, as another
// process would have: only the directory lock keeps them apart.
func TestDirContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(*testing.T) store.Store {
		dir := t.TempDir()
		return func(t *testing.T) store.Store {
			fs, err := store.NewDir(dir)
			require.NoError(t, err)
			return fs
		}
	})
}
