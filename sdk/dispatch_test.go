package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

// echoProvider returns its request messages as history and stores them as
// an append patch, which is enough to see that requests and responses pass
// through dispatch intact.
type echoProvider struct {
	info  abi.PluginInfo
	err   error
	panic any
}

func (p *echoProvider) Describe() abi.PluginInfo { return p.info }

func (p *echoProvider) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	if p.panic != nil {
		panic(p.panic)
	}
	if p.err != nil {
		return nil, p.err
	}
	return &abi.ProvideResponse{Messages: req.RequestMessages}, nil
}

func (p *echoProvider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	if p.err != nil {
		return nil, p.err
	}
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: AppendOps("/messages", req.ResponseMessages)}}, nil
}

// fullProvider adds every optional interface to echoProvider.
type fullProvider struct{ echoProvider }

func (fullProvider) List(context.Context, *abi.ListRequest) (*abi.ListResponse, error) {
	return nil, nil
}

func (fullProvider) Clear(context.Context, *abi.ClearRequest) (*abi.ClearResponse, error) {
	return &abi.ClearResponse{StateChange: abi.StateChange{State: json.RawMessage(`{"messages":[]}`)}}, nil
}

func (fullProvider) MigrateState(_ context.Context, req *abi.MigrateStateRequest) (*abi.MigrateStateResponse, error) {
	return &abi.MigrateStateResponse{State: req.State}, nil
}

func TestHandler(t *testing.T) {
	tests := []struct {
		name     string
		provider Provider
		export   string
		input    string
		want     string   // exact JSON output when no error is expected
		wantErr  error    // sentinel the error must match
		errParts []string // substrings of the error message
	}{
		{
			name:     "describe fills the ABI version",
			provider: &echoProvider{info: abi.PluginInfo{Name: "echo", Version: "1.2.3", StateVersion: 1, StateSchema: json.RawMessage(`{}`)}},
			export:   abi.ExportDescribe,
			want:     `{"name":"echo","version":"1.2.3","abi":"` + abi.Version + `","state_version":1,"state_schema":{}}`,
		},
		{
			name:     "describe keeps a declared ABI version",
			provider: &echoProvider{info: abi.PluginInfo{Name: "echo", ABI: "1.7", StateSchema: json.RawMessage(`{}`)}},
			export:   abi.ExportDescribe,
			input:    `{}`,
			want:     `{"name":"echo","version":"","abi":"1.7","state_version":0,"state_schema":{}}`,
		},
		{
			name:     "describe refuses malformed JSON",
			provider: &echoProvider{},
			export:   abi.ExportDescribe,
			input:    `{"x":`,
			wantErr:  abi.ErrInvalidArgument,
		},
		{
			name:     "describe refuses a non-object request",
			provider: &echoProvider{},
			export:   abi.ExportDescribe,
			input:    `[1]`,
			wantErr:  abi.ErrInvalidArgument,
		},
		{
			name:     "provide passes messages through byte for byte",
			provider: &echoProvider{},
			export:   abi.ExportProvide,
			input:    `{"session":{"session_id":"s","state_key":"k"},"request_messages":[{"role":"user","x_future":{"a":[1,2]},"contents":[]}],"x_envelope":true}`,
			want:     `{"messages":[{"role":"user","x_future":{"a":[1,2]},"contents":[]}]}`,
		},
		{
			name:     "store answers an append patch",
			provider: &echoProvider{},
			export:   abi.ExportStore,
			input:    `{"session":{"session_id":"s","state_key":"k"},"request_messages":[],"response_messages":[{"role":"assistant"}]}`,
			want:     `{"state_patch":[{"op":"add","path":"/messages/-","value":{"role":"assistant"}}]}`,
		},
		{name: "provide refuses bad JSON", provider: &echoProvider{}, export: abi.ExportProvide, input: `not json`, wantErr: abi.ErrInvalidArgument},
		{name: "provide refuses an empty request", provider: &echoProvider{}, export: abi.ExportProvide, input: ``, wantErr: abi.ErrInvalidArgument},
		{name: "provide refuses null", provider: &echoProvider{}, export: abi.ExportProvide, input: `null`, wantErr: abi.ErrInvalidArgument},
		{name: "provide refuses an array", provider: &echoProvider{}, export: abi.ExportProvide, input: `[]`, wantErr: abi.ErrInvalidArgument},
		{name: "provide refuses a session of the wrong type", provider: &echoProvider{}, export: abi.ExportProvide, input: `{"session":"s"}`, wantErr: abi.ErrInvalidArgument},
		{
			name: "provide refuses a message that is not an object", provider: &echoProvider{}, export: abi.ExportProvide,
			input: `{"request_messages":[{},"text"]}`, wantErr: abi.ErrInvalidArgument, errParts: []string{"request_messages[1]"},
		},
		{name: "store refuses truncated JSON", provider: &echoProvider{}, export: abi.ExportStore, input: `{"request_messages":[`, wantErr: abi.ErrInvalidArgument},
		{
			name: "store refuses response messages of the wrong type", provider: &echoProvider{}, export: abi.ExportStore,
			input: `{"response_messages":{"role":"user"}}`, wantErr: abi.ErrInvalidArgument,
		},
		{
			name: "store refuses a response message that is not an object", provider: &echoProvider{}, export: abi.ExportStore,
			input: `{"request_messages":[],"response_messages":[3]}`, wantErr: abi.ErrInvalidArgument, errParts: []string{"response_messages[0]"},
		},
		{
			name: "a provider error keeps its code", provider: &echoProvider{err: abi.Errorf(abi.CodeNotFound, "no such thread")}, export: abi.ExportProvide,
			input: `{}`, wantErr: abi.ErrNotFound, errParts: []string{"no such thread"},
		},
		{
			name: "a wrapped sentinel keeps its code", provider: &echoProvider{err: fmt.Errorf("lookup: %w", abi.ErrUnavailable)}, export: abi.ExportStore,
			input: `{}`, wantErr: abi.ErrUnavailable,
		},
		{
			name: "a plain error is internal", provider: &echoProvider{err: errors.New("disk on fire")}, export: abi.ExportProvide,
			input: `{}`, wantErr: abi.ErrInternal, errParts: []string{"disk on fire"},
		},
		{
			name: "a panic is internal", provider: &echoProvider{panic: "boom"}, export: abi.ExportProvide,
			input: `{}`, wantErr: abi.ErrInternal, errParts: []string{"panic", "boom", "(at sdk/dispatch_test.go:", "in github.com/wasmhist/wasmhist/sdk.(*echoProvider).Provide", "run the provider natively"},
		},
		{name: "list without Lister is unimplemented", provider: &echoProvider{}, export: abi.ExportList, input: `{}`, wantErr: abi.ErrUnimplemented, errParts: []string{"Lister"}},
		{name: "clear without Clearer is unimplemented", provider: &echoProvider{}, export: abi.ExportClear, input: `{}`, wantErr: abi.ErrUnimplemented, errParts: []string{"Clearer"}},
		{name: "migrate_state without StateMigrator is unimplemented", provider: &echoProvider{}, export: abi.ExportMigrateState, input: `{}`, wantErr: abi.ErrUnimplemented, errParts: []string{"StateMigrator"}},
		{name: "an unknown export is unimplemented", provider: &echoProvider{}, export: "compact", input: `{}`, wantErr: abi.ErrUnimplemented},
		{name: "list encodes an empty page as []", provider: &fullProvider{}, export: abi.ExportList, input: `{"cursor":""}`, want: `{"messages":[]}`},
		{name: "clear answers the provider's state", provider: &fullProvider{}, export: abi.ExportClear, input: `{}`, want: `{"state":{"messages":[]}}`},
		{name: "migrate_state reaches the provider", provider: &fullProvider{}, export: abi.ExportMigrateState, input: `{"from_version":1,"state":{"a":1}}`, want: `{"state":{"a":1}}`},
		{name: "list refuses a malformed request", provider: &fullProvider{}, export: abi.ExportList, input: `{"limit":"ten"}`, wantErr: abi.ErrInvalidArgument},
		{name: "nil provider is internal", provider: nil, export: abi.ExportDescribe, wantErr: abi.ErrInternal, errParts: []string{"sdk.Register"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Handler(tt.provider)(t.Context(), tt.export, []byte(tt.input))
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr, "output %s", out)
				var aerr *abi.Error
				require.ErrorAs(t, err, &aerr, "the error must be an *abi.Error, as the wire carries it")
				for _, part := range tt.errParts {
					assert.ErrorContains(t, err, part)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(out))
		})
	}
}

func TestRegister(t *testing.T) {
	defer func(p Provider) { registered = p }(registered)
	registered = nil

	assert.Panics(t, func() { Register(nil) }, "nil provider")
	p := &echoProvider{}
	Register(p)
	require.Same(t, p, registered)
	assert.Panics(t, func() { Register(&echoProvider{}) }, "second Register")
	assert.Same(t, p, registered, "a second Register replaced the provider")
	assert.False(t, kept.transient, "a provider that is not Transient")

	registered = nil
	defer func(k reuse) { kept = k }(kept)
	Register(&transientProvider{})
	assert.True(t, kept.transient, "a Transient provider")
}

// factsProvider records the session facts of each call.
type factsProvider struct {
	echoProvider
	seen []abi.SessionFacts
}

func (p *factsProvider) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	p.seen = append(p.seen, req.Session)
	return &abi.ProvideResponse{}, nil
}

func (p *factsProvider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	p.seen = append(p.seen, req.Session)
	return &abi.StoreResponse{}, nil
}

// TestDispatchCarriesOnlyGuesses: what a guest keeps between calls (the
// last session facts, the last output's buffer) never shows in a later
// call: each request's facts are its own, absent ones are empty, and a
// failed call leaves the next one intact.
func TestDispatchCarriesOnlyGuesses(t *testing.T) {
	p := &factsProvider{}
	var kept reuse
	calls := []struct{ export, input string }{
		{abi.ExportProvide, `{"session":{"session_id":"a","state_key":"k","service_session_id":"svc"}}`},
		{abi.ExportStore, `{"session":{"session_id":"a","state_key":"k"}}`},
		{abi.ExportProvide, `{"session":{"session_id":"b","state_key":"k"}}`},
		{abi.ExportStore, `{"session":{"session_id":"b","state_key":"k"},"request_messages":7}`}, // fails
		{abi.ExportProvide, `{}`},
		{abi.ExportStore, `{"session":{"session_id":"a\u0062","state_key":"k"}}`},
		{abi.ExportStore, `{"session":{"session_id":"a\u0062","state_key":"k"}}`},
		// The member the previous call sent, repeated after another: its
		// members are merged into the first's, as encoding/json does.
		{abi.ExportProvide, `{"session":{"service_session_id":"x"},"session":{"session_id":"a\u0062","state_key":"k"}}`},
		{abi.ExportProvide, `{"session":{"session_id":"a\u0062","state_key":"k"},"session":{"service_session_id":"y"}}`},
		{abi.ExportStore, `{"session":{"session_id":"a\u0062","state_key":"k"} }`},
	}
	for _, c := range calls {
		dispatch(context.Background(), p, c.export, []byte(c.input), &kept)
	}
	assert.Equal(t, []abi.SessionFacts{
		{SessionID: "a", StateKey: "k", ServiceSessionID: "svc"},
		{SessionID: "a", StateKey: "k"},
		{SessionID: "b", StateKey: "k"},
		{},
		{SessionID: "ab", StateKey: "k"},
		{SessionID: "ab", StateKey: "k"},
		{SessionID: "ab", StateKey: "k", ServiceSessionID: "x"},
		{SessionID: "ab", StateKey: "k", ServiceSessionID: "y"},
		{SessionID: "ab", StateKey: "k"},
	}, p.seen)
}

// staticProvider answers every call with the same responses, allocating
// nothing itself.
type staticProvider struct{ echoProvider }

var (
	staticProvide = &abi.ProvideResponse{FromState: &abi.StateSelection{Pointer: "/messages"}}
	staticStore   = &abi.StoreResponse{}
)

func (*staticProvider) Provide(context.Context, *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	return staticProvide, nil
}

func (*staticProvider) Store(context.Context, *abi.StoreRequest) (*abi.StoreResponse, error) {
	return staticStore, nil
}

// TestDispatchAllocatesOncePerRequest: what a guest allocates itself for a
// provide or a store, once the previous call's output buffer and session
// member are kept, is one object, the request with its message arena (each
// allocation costs a WebAssembly guest thousands of instructions).
func TestDispatchAllocatesOncePerRequest(t *testing.T) {
	msg := `{"role":"user","contents":[{"type":"text","text":"hi"}]}`
	session := `"session":{"session_id":"s","state_key":"history"}`
	tests := []struct{ name, export, input string }{
		{name: "provide", export: abi.ExportProvide, input: `{` + session + `,"request_messages":[` + msg + `]}`},
		{name: "store", export: abi.ExportStore, input: `{` + session + `,"request_messages":[` + msg + `],"response_messages":[` + msg + `]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kept reuse
			p, in := &staticProvider{}, []byte(tt.input)
			call := func() {
				out, aerr := dispatch(context.Background(), p, tt.export, in, &kept)
				require.Nil(t, aerr)
				kept.out = out[:0]
			}
			call()
			assert.Equal(t, 1.0, testing.AllocsPerRun(100, call))
		})
	}
}

// transientProvider is a Transient provider that records, within each
// call, the messages and config it was handed, copied.
type transientProvider struct {
	echoProvider
	seen []string
}

func (*transientProvider) Transient() {}

func (p *transientProvider) record(config json.RawMessage, lists ...[]json.RawMessage) {
	var b strings.Builder
	b.WriteString(string(config))
	for _, l := range lists {
		b.WriteString(" |")
		for _, m := range l {
			b.WriteString(" " + string(m))
		}
	}
	p.seen = append(p.seen, b.String())
}

func (p *transientProvider) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	p.record(req.Config, req.RequestMessages)
	return staticProvide, nil
}

func (p *transientProvider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	p.record(req.Config, req.RequestMessages, req.ResponseMessages)
	return staticStore, nil
}

// TestDispatchReusesForTransient: for a Transient provider a guest writes
// each request over the last one's (its input buffer, the request and its
// message arena): a provide or a store allocates nothing once the first has
// run, and each request is still whole and only its own, whatever the one
// before held.
func TestDispatchReusesForTransient(t *testing.T) {
	p := &transientProvider{}
	kept := reuse{transient: true}
	call := func(export, input string) {
		in := kept.input(len(input))
		copy(in, input)
		out, aerr := dispatch(context.Background(), p, export, in, &kept)
		require.Nil(t, aerr)
		kept.out = out[:0]
	}
	m := func(n int) string { return `{"n":` + strconv.Itoa(n) + `}` }
	session := `"session":{"session_id":"s","state_key":"k"}`
	call(abi.ExportStore, `{`+session+`,"config":{"c":1},"request_messages":[`+m(1)+`,`+m(2)+`,`+m(3)+`],"response_messages":[`+m(4)+`]}`)
	call(abi.ExportStore, `{`+session+`,"request_messages":[`+m(5)+`],"response_messages":[]}`)
	call(abi.ExportProvide, `{`+session+`,"request_messages":[`+m(6)+`,`+m(7)+`]}`)
	call(abi.ExportProvide, `{`+session+`}`)
	call(abi.ExportStore, `{`+session+`,"request_messages":[],"response_messages":[`+m(8)+`,`+m(9)+`]}`)
	assert.Equal(t, []string{
		`{"c":1} | {"n":1} {"n":2} {"n":3} | {"n":4}`,
		` | {"n":5} |`,
		` | {"n":6} {"n":7}`,
		` |`,
		` | | {"n":8} {"n":9}`,
	}, p.seen)

	static := &staticProvider{}
	for _, tt := range []struct{ name, export, input string }{
		{name: "provide", export: abi.ExportProvide, input: `{` + session + `,"request_messages":[` + m(1) + `]}`},
		{name: "store", export: abi.ExportStore, input: `{` + session + `,"request_messages":[` + m(1) + `],"response_messages":[` + m(2) + `]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kept := reuse{transient: true}
			call := func() {
				in := kept.input(len(tt.input))
				copy(in, tt.input)
				out, aerr := dispatch(context.Background(), transientStatic{static}, tt.export, in, &kept)
				require.Nil(t, aerr)
				kept.out = out[:0]
			}
			call()
			assert.Equal(t, 0.0, testing.AllocsPerRun(100, call))
		})
	}
}

// transientStatic is staticProvider, Transient.
type transientStatic struct{ *staticProvider }

func (transientStatic) Transient() {}

// TestReuseInput: the input buffer is the last one's only for a Transient
// provider, only when large enough, and one above maxSpare is not kept.
func TestReuseInput(t *testing.T) {
	var plain reuse
	a, b := plain.input(10), plain.input(10)
	assert.NotSame(t, &a[0], &b[0], "not Transient: a new buffer each call")

	k := reuse{transient: true}
	first := k.input(100)
	require.Len(t, first, 100)
	again := k.input(40)
	require.Len(t, again, 40)
	assert.Same(t, &first[0], &again[0], "Transient: the last buffer, resliced")
	larger := k.input(200)
	require.Len(t, larger, 200)
	assert.NotSame(t, &first[0], &larger[0], "a larger input needs a new buffer")
	assert.Same(t, &larger[0], &k.input(150)[0], "and that one is kept")
	huge := k.input(maxSpare + 1)
	require.Len(t, huge, maxSpare+1)
	assert.Same(t, &larger[0], &k.input(10)[0], "a buffer above maxSpare is not kept")
}
