package sdk

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/wasmhist/wasmhist/abi"
)

type testState struct {
	Messages []json.RawMessage `json:"messages"`
	Count    int               `json:"count"`
}

func TestDecodeState(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    testState
		wantErr error
	}{
		{name: "absent", in: ``, want: testState{}},
		{name: "null", in: `null`, want: testState{}},
		{name: "messages stay raw", in: `{"messages":[{"role":"user"}, {"b":2}],"count":2}`, want: testState{Messages: []json.RawMessage{json.RawMessage(`{"role":"user"}`), json.RawMessage(`{"b":2}`)}, Count: 2}},
		{name: "unknown fields ignored", in: `{"count":1,"later":true}`, want: testState{Count: 1}},
		{name: "wrong type", in: `{"count":"one"}`, wantErr: abi.ErrInvalidArgument},
		{name: "bad JSON", in: `{"count":`, wantErr: abi.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeState[testState](json.RawMessage(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeConfig(t *testing.T) {
	type config struct {
		MaxMessages int `json:"max_messages"`
	}
	tests := []struct {
		name    string
		in      string
		want    config
		wantErr error
	}{
		{name: "absent", in: ``},
		{name: "set", in: `{"max_messages":5}`, want: config{MaxMessages: 5}},
		{name: "wrong type", in: `{"max_messages":"5"}`, wantErr: abi.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeConfig[config](json.RawMessage(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAppendOps(t *testing.T) {
	msgs := []json.RawMessage{json.RawMessage(`{"n":1}`), json.RawMessage(`{"n":2}`)}
	got, err := json.Marshal(AppendOps("/messages", msgs))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"add","path":"/messages/-","value":{"n":1}},{"op":"add","path":"/messages/-","value":{"n":2}}]`
	if string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	if ops := AppendOps("/messages", nil); len(ops) != 0 {
		t.Fatalf("AppendOps(nil) = %v, want no operations", ops)
	}
}
