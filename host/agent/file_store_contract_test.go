package agent_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/storetest"
)

// Each handle is a FileStore of its own on one directory, as another
// process would have: only the directory lock keeps them apart.
func TestFileStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(*testing.T) agent.SessionStore {
		dir := t.TempDir()
		return func(t *testing.T) agent.SessionStore {
			fs, err := agent.NewFileStore(dir)
			require.NoError(t, err)
			return fs
		}
	})
}
