package schemas_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/schemas"
)

// compiler returns a compiler that knows the project schemas and refuses to
// load anything else, as the host's does.
func compiler(t testing.TB) *jsonschema.Compiler {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	c.LoadURL = func(u string) (io.ReadCloser, error) { return nil, fmt.Errorf("refusing to load %s", u) }
	for _, n := range schemas.Names() {
		b, err := schemas.Read(n)
		require.NoError(t, err)
		require.NoError(t, c.AddResource(schemas.ID(n), bytes.NewReader(b)), n)
	}
	return c
}

func project(t testing.TB) map[string]*jsonschema.Schema {
	t.Helper()
	c := compiler(t)
	out := map[string]*jsonschema.Schema{}
	for _, n := range schemas.Names() {
		s, err := c.Compile(schemas.ID(n))
		require.NoError(t, err, "compiling %s", n)
		out[n] = s
	}
	return out
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func TestSchemaFiles(t *testing.T) {
	names := schemas.Names()
	require.NotEmpty(t, names, "no embedded schemas")
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			b, _ := schemas.Read(n)
			var head struct {
				Schema string `json:"$schema"`
				ID     string `json:"$id"`
				Title  string `json:"title"`
			}
			require.NoError(t, json.Unmarshal(b, &head))
			assert.Equal(t, schemas.ID(n), head.ID, "$id")
			assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", head.Schema, "$schema")
			assert.NotEmpty(t, head.Title, "no title")
		})
	}
	project(t) // every file compiles, every $ref resolves without loading
}

// TestEveryExportHasSchemas keeps ExportSchemas in step with the ABI.
func TestEveryExportHasSchemas(t *testing.T) {
	exports := append(slices.Clone(abi.RequiredExports), abi.OptionalExports...)
	for _, e := range exports {
		pair, ok := schemas.ExportSchemas[e]
		if !assert.True(t, ok, "export %s has no schemas", e) {
			continue
		}
		for _, n := range pair {
			if n != "" {
				assert.Contains(t, schemas.Names(), n, "export %s: schema %s is not embedded", e, n)
			}
		}
	}
	assert.Len(t, schemas.ExportSchemas, len(exports), "ExportSchemas against the ABI's exports")
}

// TestGoTypesMatchSchemas encodes fully populated abi values with
// encoding/json and checks them against their schemas, so that a field
// renamed in abi/ without its schema (or the reverse) fails here.
func TestGoTypesMatchSchemas(t *testing.T) {
	ps := project(t)
	msg := abi.Message{
		Role: abi.RoleAssistant,
		Contents: []abi.Content{
			abi.Text("hi"),
			{Type: abi.ContentReasoning, Text: "because"},
			{Type: abi.ContentFunctionCall, CallID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)},
			{Type: abi.ContentFunctionResult, CallID: "c1", Result: json.RawMessage(`[1]`)},
			{Type: abi.ContentFunctionResult, CallID: "c2", Error: "boom"},
			{Type: abi.ContentData, MediaType: "image/png", Data: []byte{0, 1, 2, 250}},
			{Type: abi.ContentURI, URI: "https://example.com/a", MediaType: "text/html"},
			{Type: abi.ContentUsage, Usage: &abi.Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3}},
			{Type: abi.ContentText, AdditionalProperties: map[string]json.RawMessage{"x": json.RawMessage(`1`)}},
		},
		MessageID: "m", AuthorName: "a", CreatedAt: "2025-01-01T00:00:00Z",
		Source:               &abi.Source{Type: abi.SourceContextProvider, ID: "rag"},
		AdditionalProperties: map[string]json.RawMessage{"k": json.RawMessage(`"v"`)},
	}
	m, _ := json.Marshal(msg)
	raw := []json.RawMessage{m}
	facts := abi.SessionFacts{SessionID: "s", StateKey: "k", ServiceSessionID: "r"}
	patch := []abi.PatchOp{{Op: abi.PatchAdd, Path: "/messages/-", Value: m}, {Op: abi.PatchRemove, Path: "/x"}}
	state := json.RawMessage(`{"messages":[]}`)
	tests := []struct {
		schema string
		value  any
	}{
		{schemas.Message, msg},
		{schemas.Message, abi.NewMessage(abi.RoleUser)},
		{schemas.PluginInfo, abi.PluginInfo{Name: "p-1", Version: "1.0.0", ABI: abi.Version, StateVersion: 1,
			StateSchema: json.RawMessage(`{"type":"object"}`), InitialState: state, ConfigSchema: json.RawMessage(`true`),
			Capabilities: []abi.Capability{abi.CapabilitySQL}, OmitState: []string{abi.ExportProvide, abi.ExportStore}}},
		{schemas.SessionFacts, facts},
		{schemas.ProvideRequest, abi.ProvideRequest{State: state, Config: json.RawMessage(`{}`), Session: facts, RequestMessages: raw}},
		{schemas.ProvideResponse, abi.ProvideResponse{Messages: raw, StateChange: abi.StateChange{Patch: patch}}},
		{schemas.ProvideResponse, abi.ProvideResponse{FromState: &abi.StateSelection{Pointer: "/messages", Window: &abi.Window{MaxMessages: 3, MaxTokens: 100}}}},
		{schemas.StoreRequest, abi.StoreRequest{State: state, Session: facts, RequestMessages: raw, ResponseMessages: raw}},
		{schemas.StoreResponse, abi.StoreResponse{StateChange: abi.StateChange{State: state}}},
		{schemas.ListRequest, abi.ListRequest{State: state, Session: facts, Cursor: "c", Limit: 10}},
		{schemas.ListResponse, abi.ListResponse{Messages: raw, NextCursor: "n"}},
		{schemas.ClearRequest, abi.ClearRequest{State: state, Session: facts}},
		{schemas.ClearResponse, abi.ClearResponse{StateChange: abi.StateChange{State: state}}},
		{schemas.MigrateStateRequest, abi.MigrateStateRequest{FromVersion: 1, State: state}},
		{schemas.MigrateStateResponse, abi.MigrateStateResponse{State: state}},
		{schemas.Error, abi.Errorf(abi.CodeNotFound, "x")},
		{schemas.PatchOp, patch[0]},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %T", tt.schema, tt.value), func(t *testing.T) {
			b, err := json.Marshal(tt.value)
			require.NoError(t, err)
			v, err := decode(b)
			require.NoError(t, err)
			require.NoError(t, ps[tt.schema].Validate(v), "%s", b)
		})
	}
}

// Classification of JSON files under examples/ and testdata/ (see README.md).
const (
	classDocument = iota // validated against a project schema
	classSchema          // a JSON Schema a plugin could declare
	classForeign         // another format: only well-formedness is checked
)

func classify(name string) (class int, schemaName string, ok bool) {
	switch {
	case strings.HasSuffix(name, ".schema.json"):
		return classSchema, "", true
	case strings.HasSuffix(name, ".foreign.json"):
		return classForeign, "", true
	}
	for _, n := range schemas.Names() {
		if name == n || strings.HasSuffix(name, "."+n) {
			return classDocument, n, true
		}
	}
	return 0, "", false
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "go.mod"))
	require.NoError(t, err, "module root not found above schemas/")
	return dir
}

// TestRepositoryDocuments validates every JSON file under an examples/ or a
// testdata/ directory anywhere in the repository. A file under a
// testdata/invalid/ directory must fail its check.
func TestRepositoryDocuments(t *testing.T) {
	root := repoRoot(t)
	ps := project(t)
	var checked, invalid int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		parts := strings.Split(rel, "/")
		if !strings.HasSuffix(d.Name(), ".json") || !(parts[0] == "examples" || slices.Contains(parts, "testdata")) {
			return nil
		}
		wantInvalid := strings.Contains("/"+rel, "/testdata/invalid/")
		t.Run(rel, func(t *testing.T) {
			class, name, ok := classify(d.Name())
			require.True(t, ok, "cannot tell what %s is: name it *.<schema>.json (one of %s), *.schema.json or *.foreign.json; see schemas/README.md", rel, strings.Join(schemas.Names(), ", "))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			var verr error
			switch class {
			case classForeign:
				if !json.Valid(b) {
					verr = fmt.Errorf("not valid JSON")
				}
			case classSchema:
				c := compiler(t)
				u := "https://wasmhist.dev/testdata/" + filepath.ToSlash(rel)
				if verr = c.AddResource(u, bytes.NewReader(b)); verr == nil {
					_, verr = c.Compile(u)
				}
			default:
				var v any
				if v, verr = decode(b); verr == nil {
					verr = ps[name].Validate(v)
				}
			}
			if wantInvalid {
				require.Error(t, verr, "%s is under testdata/invalid/ but passes its check (%s)", rel, checkName(class, name))
			} else {
				require.NoError(t, verr, "%s fails its check (%s)", rel, checkName(class, name))
			}
		})
		checked++
		if wantInvalid {
			invalid++
		}
		return nil
	})
	require.NoError(t, err)
	// schemas/testdata holds examples of both kinds; finding none means the
	// walk is broken, not that there is nothing to check.
	require.True(t, checked > 0 && invalid > 0, "checked %d files (%d invalid); the walk found nothing to check", checked, invalid)
}

func checkName(class int, name string) string {
	switch class {
	case classSchema:
		return "compile as a JSON Schema"
	case classForeign:
		return "well-formed JSON"
	}
	return "validate against " + name
}

// TestClassify pins the naming rule README.md documents.
func TestClassify(t *testing.T) {
	tests := []struct {
		file  string
		class int
		name  string
		ok    bool
	}{
		{"demo.session.json", classDocument, "session.json", true},
		{"session.json", classDocument, "session.json", true},
		{"a.b.store-response.json", classDocument, "store-response.json", true},
		{"state.schema.json", classSchema, "", true},
		{"chat.foreign.json", classForeign, "", true},
		{"config.json", 0, "", false},
		{"xsession.json", 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			class, name, ok := classify(tt.file)
			assert.Equal(t, tt.ok, ok, "ok")
			assert.Equal(t, tt.class, class, "class")
			assert.Equal(t, tt.name, name, "schema name")
		})
	}
}
