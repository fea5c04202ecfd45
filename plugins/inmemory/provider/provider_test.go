package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

func msg(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"role":"user","contents":[{"type":"text","text":"m%d"}]}`, n))
}

func msgs(from, to int) []json.RawMessage {
	var out []json.RawMessage
	for i := from; i < to; i++ {
		out = append(out, msg(i))
	}
	return out
}

func TestDescribe(t *testing.T) {
	info := Provider{}.Describe()
	if info.Name != Name || info.ABI != abi.Version || info.StateVersion != StateVersion {
		t.Fatalf("describe = %+v", info)
	}
	for name, doc := range map[string]json.RawMessage{"state_schema": info.StateSchema, "config_schema": info.ConfigSchema, "initial_state": info.InitialState} {
		if !json.Valid(doc) {
			t.Errorf("%s is not valid JSON: %s", name, doc)
		}
	}
	// provide, store and clear must not receive the history: that is what
	// keeps the per-call cost flat as the history grows.
	for _, export := range []string{abi.ExportProvide, abi.ExportStore, abi.ExportClear} {
		if !slices.Contains(info.OmitState, export) {
			t.Errorf("omit_state %v lacks %s", info.OmitState, export)
		}
	}
	if slices.Contains(info.OmitState, abi.ExportList) {
		t.Errorf("omit_state %v lists list, which needs the state", info.OmitState)
	}
}

func TestProvideWindow(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		want    *abi.Window
		wantErr error
	}{
		{name: "no config", config: ``, want: nil},
		{name: "empty config", config: `{}`, want: nil},
		{name: "zero bounds mean none", config: `{"max_messages":0,"max_tokens":0}`, want: nil},
		{name: "max messages", config: `{"max_messages":10}`, want: &abi.Window{MaxMessages: 10}},
		{name: "max tokens", config: `{"max_tokens":2000}`, want: &abi.Window{MaxTokens: 2000}},
		{name: "both", config: `{"max_messages":4,"max_tokens":300}`, want: &abi.Window{MaxMessages: 4, MaxTokens: 300}},
		{name: "negative", config: `{"max_messages":-1}`, wantErr: abi.ErrInvalidArgument},
		{name: "wrong type", config: `{"max_tokens":"many"}`, wantErr: abi.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Provider{}.Provide(t.Context(), &abi.ProvideRequest{Config: json.RawMessage(tt.config), RequestMessages: msgs(0, 2)})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if len(resp.Messages) != 0 || resp.State != nil || resp.Patch != nil {
				t.Fatalf("provide answered by value or changed state: %+v", resp)
			}
			want := &abi.StateSelection{Pointer: "/messages", Window: tt.want}
			if !reflect.DeepEqual(resp.FromState, want) {
				t.Fatalf("from_state = %+v (window %+v), want %+v (window %+v)", resp.FromState, resp.FromState.Window, want, want.Window)
			}
		})
	}
}

func TestStore(t *testing.T) {
	tests := []struct {
		name              string
		request, response []json.RawMessage
		want              []json.RawMessage // appended values, in order
	}{
		{name: "request then response", request: msgs(0, 2), response: msgs(2, 4), want: msgs(0, 4)},
		{name: "response only", response: msgs(5, 6), want: msgs(5, 6)},
		{name: "request only", request: msgs(7, 9), want: msgs(7, 9)},
		{name: "nothing", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Provider{}.Store(t.Context(), &abi.StoreRequest{RequestMessages: tt.request, ResponseMessages: tt.response})
			if err != nil {
				t.Fatal(err)
			}
			if resp.State != nil {
				t.Fatalf("store answered a whole state; it must append with a patch")
			}
			var got []json.RawMessage
			for _, op := range resp.Patch {
				if op.Op != abi.PatchAdd || op.Path != "/messages/-" {
					t.Fatalf("patch op %+v, want add /messages/-", op)
				}
				got = append(got, op.Value)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("appended %s, want %s", got, tt.want)
			}
		})
	}
}

func TestStoreKeepsMessagesVerbatim(t *testing.T) {
	// Messages are opaque to the plugin: unknown fields and formatting pass
	// through untouched.
	in := `{"session":{"session_id":"s","state_key":"k"},"request_messages":[{"role":"user", "x_later": {"k": [1, 2]}}],"response_messages":[]}`
	out, err := sdk.Handler(Provider{})(t.Context(), abi.ExportStore, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"state_patch":[{"op":"add","path":"/messages/-","value":{"role":"user", "x_later": {"k": [1, 2]}}}]}`
	if string(out) != want {
		t.Fatalf("store output\n got %s\nwant %s", out, want)
	}
}

func TestList(t *testing.T) {
	state, err := json.Marshal(State{Messages: msgs(0, 5)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		state    string
		cursor   string
		limit    int
		want     []json.RawMessage
		wantNext string
		wantErr  error
	}{
		{name: "first page", state: string(state), limit: 2, want: msgs(0, 2), wantNext: "2"},
		{name: "middle page", state: string(state), cursor: "2", limit: 2, want: msgs(2, 4), wantNext: "4"},
		{name: "last page", state: string(state), cursor: "4", limit: 2, want: msgs(4, 5)},
		{name: "default limit returns all", state: string(state), want: msgs(0, 5)},
		{name: "cursor at the end", state: string(state), cursor: "5", want: []json.RawMessage{}},
		{name: "empty history", state: `{"messages":[]}`, want: []json.RawMessage{}},
		{name: "cursor past the end", state: string(state), cursor: "6", wantErr: abi.ErrInvalidArgument},
		{name: "negative cursor", state: string(state), cursor: "-1", wantErr: abi.ErrInvalidArgument},
		{name: "cursor not a number", state: string(state), cursor: "abc", wantErr: abi.ErrInvalidArgument},
		{name: "state of the wrong shape", state: `{"messages":{}}`, wantErr: abi.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Provider{}.List(t.Context(), &abi.ListRequest{State: json.RawMessage(tt.state), Cursor: tt.cursor, Limit: tt.limit})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if len(resp.Messages) != len(tt.want) || (len(tt.want) > 0 && !reflect.DeepEqual(resp.Messages, tt.want)) {
				t.Fatalf("page %s, want %s", resp.Messages, tt.want)
			}
			if resp.NextCursor != tt.wantNext {
				t.Fatalf("next cursor %q, want %q", resp.NextCursor, tt.wantNext)
			}
		})
	}
}

func TestListPagesThroughEverything(t *testing.T) {
	state, err := json.Marshal(State{Messages: msgs(0, 7)})
	if err != nil {
		t.Fatal(err)
	}
	var all []json.RawMessage
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 7 {
			t.Fatal("list never reached the last page")
		}
		resp, err := Provider{}.List(t.Context(), &abi.ListRequest{State: state, Cursor: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, resp.Messages...)
		if cursor = resp.NextCursor; cursor == "" {
			break
		}
	}
	if !reflect.DeepEqual(all, msgs(0, 7)) {
		t.Fatalf("pages joined = %s", all)
	}
}

func TestClear(t *testing.T) {
	resp, err := Provider{}.Clear(t.Context(), &abi.ClearRequest{State: json.RawMessage(`{"messages":[{"role":"user"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.State) != `{"messages":[]}` || resp.Patch != nil {
		t.Fatalf("clear = %+v, want the empty history", resp)
	}
}
