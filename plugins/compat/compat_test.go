//go:build !wasip1

// Package compat holds the compatibility corpus: the sample plugins as
// they were built at earlier ABI minors (testdata/abi-MINOR, with the
// commit each was built from in SOURCE, by build-corpus.sh), which every
// later host must keep running. CI loads each on the current host, runs a
// conversation through it across two processes' worth of hosts, and the
// conformance suite by the rules of the plugin's own minor.
package compat

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// corpusPlugin is one binary of the corpus, unpacked.
type corpusPlugin struct {
	minor, name, commit, wasm string
}

func (c corpusPlugin) String() string {
	return "ABI " + c.minor + " " + c.name + " (built from " + c.commit[:12] + ")"
}

func corpus(t *testing.T) []corpusPlugin {
	t.Helper()
	dirs, err := filepath.Glob("testdata/abi-*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs, "no corpus under testdata")
	out := t.TempDir()
	var all []corpusPlugin
	for _, dir := range dirs {
		source, err := os.ReadFile(filepath.Join(dir, "SOURCE"))
		require.NoError(t, err)
		fields := map[string]string{}
		for _, line := range strings.Split(string(source), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok {
				fields[k] = v
			}
		}
		minor := strings.TrimPrefix(filepath.Base(dir), "abi-")
		require.Equal(t, minor, fields["abi"], "%s/SOURCE", dir)
		require.Len(t, fields["commit"], 40, "%s/SOURCE names the commit", dir)
		for _, name := range strings.Fields(fields["plugins"]) {
			gz, err := os.ReadFile(filepath.Join(dir, name+".wasm.gz"))
			require.NoError(t, err)
			r, err := gzip.NewReader(bytes.NewReader(gz))
			require.NoError(t, err)
			wasm, err := io.ReadAll(r)
			require.NoError(t, err)
			path := filepath.Join(out, "abi-"+minor+"-"+name+".wasm")
			require.NoError(t, os.WriteFile(path, wasm, 0o644))
			all = append(all, corpusPlugin{minor: minor, name: name, commit: fields["commit"], wasm: path})
		}
	}
	return all
}

// options grants a plugin that wants the sql capability a database of the
// test's.
func options(t *testing.T, db string) host.LoadOptions {
	return host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}}
}

func newHost(t *testing.T) *host.Host {
	t.Helper()
	h, err := host.New(t.Context(), host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// TestCorpusConversation: a fact told to an agent whose history an old
// plugin keeps is recalled by another agent, on another host, that resumes
// the saved session with the same plugin.
func TestCorpusConversation(t *testing.T) {
	for _, c := range corpus(t) {
		t.Run(c.minor+"/"+c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "history.db")
			say := func(s *session.Session, text string) string {
				h := newHost(t)
				p, err := h.Load(t.Context(), host.File(c.wasm), options(t, db))
				require.NoError(t, err, "%v no longer loads", c)
				require.Equal(t, c.minor, p.Info().ABI, "%v", c)
				a, err := agent.New(agent.Config{Model: offline.New(), Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}}})
				require.NoError(t, err)
				res, err := a.Run(t.Context(), s, []abi.Message{abi.NewMessage(abi.RoleUser, text)}, nil)
				require.NoError(t, err, "%v: a run fails", c)
				return res.Text()
			}
			s := session.New()
			say(s, "I like Italian food, J’aime le thé ☕")
			saved, err := session.Encode(s)
			require.NoError(t, err)
			resumed, err := session.Decode(saved)
			require.NoError(t, err)
			assert.Contains(t, say(resumed, "What food do I like?"), "Italian food", "%v forgot the conversation", c)
		})
	}
}

// TestCorpusConformance: each old plugin passes the conformance suite by
// the rules of its own minor; rules of later minors are at most advice.
func TestCorpusConformance(t *testing.T) {
	h := newHost(t)
	for _, c := range corpus(t) {
		t.Run(c.minor+"/"+c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "history.db")
			f := func(ctx context.Context) (sdktest.Subject, error) {
				return h.Load(ctx, host.File(c.wasm), options(t, db))
			}
			for _, cs := range sdktest.Cases() {
				v := cs.Judge(t.Context(), f)
				if _, skipped := sdktest.IsSkipped(v.Err); skipped {
					continue
				}
				if v.Err != nil {
					t.Errorf("%v fails conformance case %s (a rule of %d.%d): %v", c, cs.Name, abi.Major, cs.Since, v.Err)
				}
				assert.Equal(t, c.minor, v.Declared, "case %s judged %v by another minor", cs.Name, c)
				for _, a := range v.Advice {
					t.Logf("%v: advice: %v", c, a)
				}
			}
		})
	}
}
