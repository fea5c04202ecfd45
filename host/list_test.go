package host_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
)

// listMessage is the i-th message of a listing test: short, and naming its
// index, so that order can be checked.
func listMessage(i int) string {
	role := "user"
	if i%2 == 1 {
		role = "assistant"
	}
	return `{"role":"` + role + `","contents":[{"type":"text","text":"message ` + strconv.Itoa(i) + ` of a long chat"}]}`
}

// inmemorySession returns a session whose history slot holds n messages,
// written as the in-memory plugin's state JSON directly.
func inmemorySession(n int) *session.Session {
	var b strings.Builder
	b.WriteString(`{"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(listMessage(i))
	}
	b.WriteString(`]}`)
	s := session.New()
	s.SessionID = "long"
	s.SetState(historyKey, session.ProviderState{Provider: provider.Name, StateVersion: provider.StateVersion, Data: json.RawMessage(b.String())})
	return s
}

// listAll pages through key with limit and returns the texts in order.
func listAll(t *testing.T, p *host.Plugin, s *session.Session, limit int) []string {
	t.Helper()
	var texts []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, next, err := p.List(t.Context(), s, historyKey, cursor, limit)
		require.NoError(t, err, "page %d (cursor %q)", pages, cursor)
		if limit > 0 {
			require.LessOrEqual(t, len(page), limit, "page %d", pages)
		}
		for _, m := range page {
			texts = append(texts, m.TextContent())
		}
		if next == "" {
			return texts
		}
		require.NotEmpty(t, page, "page %d is empty but not the last", pages)
		require.NotEqual(t, cursor, next, "page %d: the cursor did not advance", pages)
		cursor = next
	}
}

func wantTexts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "message " + strconv.Itoa(i) + " of a long chat"
	}
	return out
}

// TestListHundredThousandMessages pages through a session of 100,000
// messages, larger than the input cap, through the in-memory plugin as
// WebAssembly: list omits the state and answers by reference, so every
// page is served and the pages joined are every message in order.
func TestListHundredThousandMessages(t *testing.T) {
	h := newHost(t, host.Config{})
	p := loadInmemory(t, h)
	require.Contains(t, p.Info().OmitState, abi.ExportList)
	const n = 100_000
	s := inmemorySession(n)
	require.Greater(t, len(s.State[historyKey].Data), host.DefaultLimits().MaxInputBytes,
		"the state must exceed the input cap, which a list carrying it could not pass")
	got := listAll(t, p, s, 1000)
	require.Len(t, got, n)
	require.Equal(t, wantTexts(n), got)

	// The host's cursors: the first page without a limit holds the
	// default 100, a cursor past the end is an empty last page, and a
	// cursor the host never issued is invalid_argument.
	page, next, err := p.List(t.Context(), s, historyKey, "", 0)
	require.NoError(t, err)
	require.Len(t, page, host.DefaultListPage)
	require.Equal(t, strconv.Itoa(host.DefaultListPage), next)
	page, next, err = p.List(t.Context(), s, historyKey, "99999", 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "message 99999 of a long chat", page[0].TextContent())
	require.Empty(t, next)
	page, next, err = p.List(t.Context(), s, historyKey, "100000000", 10)
	require.NoError(t, err)
	require.Empty(t, page)
	require.Empty(t, next)
	for _, bad := range []string{"abc", "-1", "01", "+5", "1e3"} {
		_, _, err := p.List(t.Context(), s, historyKey, bad, 10)
		require.ErrorIs(t, err, abi.ErrInvalidArgument, "cursor %q", bad)
	}
}

// oneDotZero is the in-memory provider as an ABI 1.0 build of it was: it
// reports ABI 1.0 and does not list list in omit_state, so the host sends
// it the state and it pages by value with its own cursors.
type oneDotZero struct{ provider.Provider }

func (o oneDotZero) Describe() abi.PluginInfo {
	info := o.Provider.Describe()
	info.ABI = "1.0"
	info.OmitState = []string{abi.ExportProvide, abi.ExportStore, abi.ExportClear}
	return info
}

// TestListOneDotZeroPlugin: a plugin of ABI 1.0, which never answers by
// reference, loads on this host, gets the state in list and pages through
// everything in order; and one that lists list in omit_state anyway is
// refused, since it cannot know the host serves the page.
func TestListOneDotZeroPlugin(t *testing.T) {
	h := newHost(t, host.Config{})
	var sawState bool
	handler := sdk.Handler(oneDotZero{})
	p, err := h.LoadNative(t.Context(), "inmemory10", func(ctx context.Context, export string, in []byte) ([]byte, error) {
		if export == abi.ExportList {
			var req abi.ListRequest
			require.NoError(t, json.Unmarshal(in, &req))
			sawState = len(req.State) > 0
			out, err := handler(ctx, export, in)
			if err == nil {
				require.NotContains(t, string(out), "from_state", "a 1.0 plugin given the state answers by value")
			}
			return out, err
		}
		return handler(ctx, export, in)
	}, host.LoadOptions{})
	require.NoError(t, err)
	require.Equal(t, "1.0", p.Info().ABI)
	const n = 500
	s := inmemorySession(n)
	got := listAll(t, p, s, 7)
	require.True(t, sawState, "the host left the state out of a 1.0 plugin's list")
	require.Equal(t, wantTexts(n), got)
	_, _, err = p.List(t.Context(), s, historyKey, "abc", 7)
	require.ErrorIs(t, err, abi.ErrInvalidArgument, "the plugin's own cursor check")

	refused := func(ctx context.Context, export string, in []byte) ([]byte, error) {
		if export == abi.ExportDescribe {
			info := oneDotZero{}.Describe()
			info.OmitState = append(info.OmitState, abi.ExportList)
			return json.Marshal(info)
		}
		return handler(ctx, export, in)
	}
	_, err = h.LoadNative(t.Context(), "inmemory10", refused, host.LoadOptions{})
	require.ErrorIs(t, err, host.ErrInvalidPlugin)
	assert.ErrorContains(t, err, "ABI 1.1")
}

// TestListFromStateInvalid: a list answer by reference is checked as
// provide's is, and only a missing member selects nothing.
func TestListFromStateInvalid(t *testing.T) {
	h := newHost(t, host.Config{})
	tests := []struct {
		name    string
		answer  string
		wantErr error
		want    int
	}{
		{"missing member", `{"from_state":{"pointer":"/nothing"}}`, nil, 0},
		{"null", `{"from_state":{"pointer":"/n"}}`, nil, 0},
		{"the messages", `{"messages":[],"from_state":{"pointer":"/messages"}}`, nil, 3},
		{"messages beside", `{"messages":[` + listMessage(0) + `],"from_state":{"pointer":"/messages"}}`, host.ErrInvalidOutput, 0},
		{"cursor beside", `{"from_state":{"pointer":"/messages"},"next_cursor":"3"}`, host.ErrInvalidOutput, 0},
		{"window", `{"from_state":{"pointer":"/messages","window":{"max_messages":2}}}`, host.ErrInvalidOutput, 0},
		{"not an array", `{"from_state":{"pointer":"/o"}}`, host.ErrInvalidOutput, 0},
		{"not a pointer", `{"from_state":{"pointer":"messages"}}`, host.ErrInvalidOutput, 0},
		{"not messages", `{"from_state":{"pointer":"/bad"}}`, host.ErrInvalidOutput, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := `{"name":"lister","version":"0","abi":"1.1","state_version":1,"state_schema":{"type":"object"},` +
				`"initial_state":{"messages":[` + listMessage(0) + `,` + listMessage(1) + `,` + listMessage(2) + `],"n":null,"o":{},"bad":[{"role":"robot"}]},"omit_state":["list"]}`
			p, err := h.LoadNative(t.Context(), "lister", func(_ context.Context, export string, in []byte) ([]byte, error) {
				switch export {
				case abi.ExportDescribe:
					return []byte(info), nil
				case abi.ExportList:
					require.NotContains(t, string(in), `"state"`, "list is in omit_state")
					return []byte(tt.answer), nil
				}
				return []byte(`{}`), nil
			}, host.LoadOptions{})
			require.NoError(t, err)
			page, next, err := p.List(t.Context(), session.New(), historyKey, "", 10)
			require.ErrorIs(t, err, tt.wantErr)
			if err == nil {
				require.Len(t, page, tt.want)
				require.Empty(t, next)
			}
		})
	}
}

// TestPagesEnd: Pages reads every page in order, and ends with
// ErrInvalidOutput, rather than going round for ever, when a plugin's
// cursors come back (a -> b -> a, each page holding a message) or a page
// other than the last holds none (a cursor of its own each time).
func TestPagesEnd(t *testing.T) {
	h := newHost(t, host.Config{})
	handler := sdk.Handler(oneDotZero{})
	pages := func(answer func(cursor string) string) *host.Plugin {
		p, err := h.LoadNative(t.Context(), "inmemory10", func(ctx context.Context, export string, in []byte) ([]byte, error) {
			if export != abi.ExportList {
				return handler(ctx, export, in)
			}
			var req abi.ListRequest
			require.NoError(t, json.Unmarshal(in, &req))
			return []byte(answer(req.Cursor)), nil
		}, host.LoadOptions{})
		require.NoError(t, err)
		return p
	}
	read := func(p *host.Plugin) (int, error) {
		n := 0
		for page, err := range p.Pages(t.Context(), inmemorySession(3), historyKey, 10) {
			if err != nil {
				return n, err
			}
			n += len(page)
			require.Less(t, n, 1000, "the pages went round")
		}
		return n, nil
	}

	n, err := read(pages(func(string) string { return `{"messages":[]}` }))
	require.NoError(t, err)
	assert.Zero(t, n, "an empty history is one empty last page")

	m := listMessage(0)
	cycle := pages(func(cursor string) string {
		next := map[string]string{"": "a", "a": "b", "b": "a"}[cursor]
		return `{"messages":[` + m + `],"next_cursor":"` + next + `"}`
	})
	n, err = read(cycle)
	require.ErrorIs(t, err, host.ErrInvalidOutput)
	assert.ErrorContains(t, err, `cursor "a" again`)
	assert.Equal(t, 3, n, "the pages before the cursor came back")

	i := 0
	empty := pages(func(string) string {
		i++
		return `{"messages":[],"next_cursor":"c` + strconv.Itoa(i) + `"}`
	})
	_, err = read(empty)
	require.ErrorIs(t, err, host.ErrInvalidOutput)
	assert.ErrorContains(t, err, "holds no message")
}
