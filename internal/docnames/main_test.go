package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moduleRoot is where go list finds this module from the test's directory.
const moduleRoot = "../.."

var (
	testIndexOnce sync.Once
	testIndex     *index
	testIndexErr  error
)

// sharedIndex loads the module's index once for all cases: go list is the
// slow part of a run.
func sharedIndex(t *testing.T) *index {
	t.Helper()
	testIndexOnce.Do(func() { testIndex, testIndexErr = loadIndex(moduleRoot) })
	require.NoError(t, testIndexErr)
	return testIndex
}

// TestFixture: the fixture's good name passes, its stale name is reported
// with file:line and advice, and the stale name in its fenced block is not
// checked.
func TestFixture(t *testing.T) {
	var out bytes.Buffer
	fixture := filepath.Join("testdata", "names.md")
	stale, err := run(moduleRoot, []string{fixture}, &out)
	require.NoError(t, err)
	assert.Equal(t, 1, stale)
	assert.Equal(t, fixture+":5: `host.NoSuchName`: package ./host declares no NoSuchName; write the present name (go doc ./host)\n", out.String())
}

// TestNames: each way of writing a name, resolved or reported for the
// intended reason.
func TestNames(t *testing.T) {
	tests := []struct {
		name     string
		markdown string
		want     string // a part of the advice; "" when the name resolves
	}{
		{"module type", "`abi.PluginInfo`", ""},
		{"module type, pointer", "a `*host.Host` each", ""},
		{"module type, slice", "`[]abi.Message`", ""},
		{"module function with arguments", "`host.New(ctx, cfg)`", ""},
		{"module composite literal", "`abi.PluginInfo{Name: \"x\"}`", ""},
		{"module struct field", "`abi.PluginInfo.StateSchema`", ""},
		{"module method", "`host.Host.Close`", ""},
		{"standard library method", "`sql.DB.BeginTx`", ""},
		{"standard library, not imported by the module", "`expvar.NewInt`", ""},
		{"dependency named unlike its path", "`pgx.Connect`", ""},
		{"test-only dependency", "`extism.NewPlugin`", ""},
		{"method promoted through embedding", "`bufio.ReadWriter.ReadString`", ""},
		{"method through an alias", "`os.FileMode.IsDir`", ""},
		{"interface method", "`io.Reader.Read`", ""},
		{"directory-qualified", "`sdk/sql.Rebind`", ""},
		{"standard library by path", "`encoding/json.Valid`", ""},
		{"two names in one span", "`errors.Is(err, abi.ErrNotFound)`", ""},
		{"variable field in an expression", "`errors.Is(r.Context, x)`", ""},
		{"not Go", "`plugins/sqlite/sqlite.wasm`", ""},
		{"lower-case selector", "`os.exit`", ""},

		{"missing name", "`host.Tool`", "package ./host declares no Tool"},
		{"missing name, pointer", "`*host.NoSuchType`", "declares no NoSuchType"},
		{"missing method", "`sql.DB.NoSuchMethod`", "sql.DB has no method or field NoSuchMethod"},
		{"missing name in an expression", "`errors.Is(err, abi.ErrNoSuch)`", "declares no ErrNoSuch"},
		{"missing package", "`nosuchpkg.Name`", "no package nosuchpkg"},
		{"missing directory", "`host/nosuch.Name`", "no package host/nosuch"},
		{"name in the wrong one of two packages", "`sdk/sql.DB`", "package ./sdk/sql declares no DB"},
	}
	idx := sharedIndex(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "doc.md")
			require.NoError(t, os.WriteFile(path, []byte("# Doc\n\n"+tt.markdown+"\n"), 0o644))
			refs, err := scanFile(path)
			require.NoError(t, err)
			var got []string
			for _, r := range refs {
				assert.Equal(t, 3, r.line)
				if msg := idx.check(r); msg != "" {
					got = append(got, msg)
				}
			}
			if tt.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Contains(t, got[0], tt.want)
		})
	}
}

// TestMarkdownFiles: testdata, hidden directories and nested modules are
// left out.
func TestMarkdownFiles(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"README.md", "a/b.md", "a/testdata/c.md", ".hidden/d.md", "peer/e.md", "peer/go.mod", "a/f.txt"} {
		p := filepath.Join(root, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	files, err := markdownFiles(root)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{filepath.Join(root, "README.md"), filepath.Join(root, "a/b.md")}, files)
}
