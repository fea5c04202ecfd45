// Package schemas holds the JSON Schemas (draft 2020-12) of every document
// wasmhist exchanges or stores: messages, sessions, plugin info and the
// request and response of each plugin export. Each file has an $id under
// BaseID and refers to the others by that $id, so a validator can load the
// whole set from FS without touching the network.
//
// The package has no dependencies and builds for GOOS=wasip1, so plugins may
// embed the schemas too.
package schemas

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

// FS holds the schema files, named like "message.json".
//
//go:embed *.json
var FS embed.FS

// BaseID is the common prefix of every schema's $id; a file's $id is BaseID
// followed by its name.
const BaseID = "https://wasmhist.dev/schemas/v1/"

// Names of the schemas of documents a caller validates most often.
const (
	Message              = "message.json"
	Session              = "session.json"
	PortableSession      = "portable-session.json"
	PluginInfo           = "plugin-info.json"
	SessionFacts         = "session-facts.json"
	PatchOp              = "patch-op.json"
	StateChange          = "state-change.json"
	Error                = "error.json"
	ProvideRequest       = "provide-request.json"
	ProvideResponse      = "provide-response.json"
	StoreRequest         = "store-request.json"
	StoreResponse        = "store-response.json"
	ListRequest          = "list-request.json"
	ListResponse         = "list-response.json"
	ClearRequest         = "clear-request.json"
	ClearResponse        = "clear-response.json"
	MigrateStateRequest  = "migrate-state-request.json"
	MigrateStateResponse = "migrate-state-response.json"
)

// Names lists the schema files in FS, sorted.
func Names() []string {
	entries, err := fs.ReadDir(FS, ".")
	if err != nil {
		// The embedded directory always exists; an error here is a build bug.
		panic("schemas: reading embedded directory: " + err.Error())
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// ID returns the $id of the schema file name.
func ID(name string) string { return BaseID + name }

// Read returns the bytes of the schema file name.
func Read(name string) ([]byte, error) { return FS.ReadFile(name) }

// ExportSchemas maps an export name to the schema files of its request and
// response. describe takes no request, so its request name is empty.
var ExportSchemas = map[string][2]string{
	"describe":      {"", PluginInfo},
	"provide":       {ProvideRequest, ProvideResponse},
	"store":         {StoreRequest, StoreResponse},
	"list":          {ListRequest, ListResponse},
	"clear":         {ClearRequest, ClearResponse},
	"migrate_state": {MigrateStateRequest, MigrateStateResponse},
}
