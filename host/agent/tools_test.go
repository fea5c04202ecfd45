package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/session"
)

// fanOut answers the first call with n calls of the tool named "t", each
// with argument {"i":<index>}, and anything later with text.
func fanOut(n int) *fakeService {
	return &fakeService{reply: func(call int, _ []abi.Message) abi.Message {
		if call > 1 {
			return abi.NewMessage(abi.RoleAssistant, "done")
		}
		m := abi.Message{Role: abi.RoleAssistant}
		for i := range n {
			m.Contents = append(m.Contents, abi.Content{
				Type: abi.ContentFunctionCall, CallID: fmt.Sprintf("c%d", i), Name: "t",
				Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			})
		}
		return m
	}}
}

func TestToolCallsAreBounded(t *testing.T) {
	const calls = 20
	tests := []struct {
		name string
		max  int // Config.MaxParallelTools
		want int // the bound it means
	}{
		{"default", 0, DefaultMaxParallelTools},
		{"sequential", 1, 1},
		{"four", 4, 4},
		{"more than the calls", 50, calls},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var running, peak atomic.Int32
			started := make(chan int)
			release := make(chan struct{})
			tool := Tool{Name: "t", Func: func(ctx context.Context, args json.RawMessage) (any, error) {
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				var a struct{ I int }
				if err := json.Unmarshal(args, &a); err != nil {
					return nil, err
				}
				started <- a.I
				<-release
				running.Add(-1)
				return a.I, nil
			}}
			a, err := New(Config{Model: fanOut(calls).client(), Tools: []Tool{tool}, MaxParallelTools: tc.max})
			require.NoError(t, err)

			done := make(chan *RunResult)
			go func() {
				res, err := a.Run(context.Background(), session.New(), []abi.Message{abi.NewMessage(abi.RoleUser, "go")}, nil)
				assert.NoError(t, err)
				done <- res
			}()
			// Hold the first tc.want tools, so that an unbounded run would
			// start more meanwhile; then let one finish per start.
			var order []int
			for range tc.want {
				order = append(order, <-started)
			}
			for range calls - tc.want {
				release <- struct{}{}
				order = append(order, <-started)
			}
			for range tc.want {
				release <- struct{}{}
			}
			res := <-done
			require.NotNil(t, res)

			assert.Equal(t, int32(tc.want), peak.Load(), "tools running at once")
			for i := range tc.want {
				// Calls start in call order; those that run together may
				// reach the tool's first line in any order.
				assert.Less(t, order[i], tc.want)
			}
			require.Len(t, res.Messages, 1+calls+1)
			for i := range calls {
				c := res.Messages[1+i].Contents[0]
				assert.Equal(t, fmt.Sprintf("c%d", i), c.CallID)
				assert.JSONEq(t, fmt.Sprint(i), string(c.Result))
			}
		})
	}
}

func TestToolCallsNotStartedWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ran atomic.Int32
	tool := Tool{Name: "t", Func: func(context.Context, json.RawMessage) (any, error) {
		ran.Add(1)
		cancel()
		return "first", nil
	}}
	a, err := New(Config{Model: fanOut(3).client(), Tools: []Tool{tool}, MaxParallelTools: 1})
	require.NoError(t, err)
	res, err := a.Run(ctx, session.New(), []abi.Message{abi.NewMessage(abi.RoleUser, "go")}, nil)
	require.NoError(t, err, "the fake service ignores the context")
	assert.Equal(t, int32(1), ran.Load(), "tools started after the cancellation")
	require.Len(t, res.Messages, 5)
	assert.JSONEq(t, `"first"`, string(res.Messages[1].Contents[0].Result))
	for _, m := range res.Messages[2:4] {
		assert.Equal(t, context.Canceled.Error(), m.Contents[0].Error)
	}
}

func TestTerminateLoopWithSequentialTools(t *testing.T) {
	var ran atomic.Int32
	tool := Tool{Name: "t", Func: func(ctx context.Context, _ json.RawMessage) (any, error) {
		if ran.Add(1) == 1 {
			TerminateLoop(ctx)
		}
		return "ok", nil
	}}
	svc := fanOut(3)
	a, err := New(Config{Model: svc.client(), Tools: []Tool{tool}, MaxParallelTools: 1})
	require.NoError(t, err)
	res, err := a.Run(context.Background(), session.New(), []abi.Message{abi.NewMessage(abi.RoleUser, "go")}, nil)
	require.NoError(t, err)
	assert.True(t, res.Terminated)
	assert.Equal(t, int32(3), ran.Load(), "every call of the iteration runs")
	assert.Len(t, svc.requests(), 1, "no model sees the results")
}

func TestToolSchemaRefusesExternalReferences(t *testing.T) {
	// Each target is a valid schema: compiling succeeds if it is read.
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, `{"type":"object"}`)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "params.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"type":"object"}`), 0o600))

	tests := []struct {
		name string
		ref  string
	}{
		{"http", srv.URL + "/params.json"},
		{"file", "file://" + filepath.ToSlash(file)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			params := json.RawMessage(fmt.Sprintf(`{"$ref":%q}`, tc.ref))
			_, err := New(Config{Model: &fakeService{}, Tools: []Tool{{Name: "t", Func: lookupTool().Func, Parameters: params}}})
			require.ErrorIs(t, err, ErrConfig)
			assert.ErrorContains(t, err, "refused")
			assert.Zero(t, hits.Load(), "the schema compiler fetched over the network")
		})
	}
}

func TestToolArgumentFormatsAreAsserted(t *testing.T) {
	tests := []struct {
		name    string
		when    string
		wantErr string // the call's error; empty when the tool runs
	}{
		{"valid date-time", "2026-11-23T10:00:00Z", ""},
		{"not a date-time", "yesterday", "invalid arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ran atomic.Int32
			tool := Tool{
				Name:       "t",
				Parameters: json.RawMessage(`{"type":"object","properties":{"when":{"type":"string","format":"date-time"}}}`),
				Func: func(context.Context, json.RawMessage) (any, error) {
					ran.Add(1)
					return "ok", nil
				},
			}
			svc := &fakeService{reply: func(n int, _ []abi.Message) abi.Message {
				if n > 1 {
					return abi.NewMessage(abi.RoleAssistant, "done")
				}
				return abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{{
					Type: abi.ContentFunctionCall, CallID: "c", Name: "t",
					Arguments: json.RawMessage(fmt.Sprintf(`{"when":%q}`, tc.when)),
				}}}
			}}
			a, err := New(Config{Model: svc.client(), Tools: []Tool{tool}})
			require.NoError(t, err)
			res, err := a.Run(context.Background(), session.New(), []abi.Message{abi.NewMessage(abi.RoleUser, "go")}, nil)
			require.NoError(t, err)
			result := res.Messages[1].Contents[0]
			if tc.wantErr == "" {
				assert.Empty(t, result.Error)
				assert.Equal(t, int32(1), ran.Load())
				return
			}
			assert.Contains(t, result.Error, tc.wantErr)
			assert.Zero(t, ran.Load(), "a tool ran with invalid arguments")
		})
	}
}
