package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
)

// inspection is what inspect reports; its JSON form is the --json output.
type inspection struct {
	File    string `json:"file"`
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	Name    string `json:"name"`
	Version string `json:"version"`
	ABI     string `json:"abi"`
	HostABI string `json:"host_abi"`
	// Exports are the exports the plugin serves: an optional export that
	// answers unimplemented (every SDK plugin exports all of them) is
	// not among them but in Unimplemented, and in Missing.
	Exports       []string         `json:"exports"`
	Missing       []string         `json:"missing_optional_exports"`
	Unimplemented []string         `json:"unimplemented_optional_exports"`
	Capabilities  []abi.Capability `json:"capabilities"`
	StateVersion  int              `json:"state_version"`
	StateSchema   json.RawMessage  `json:"state_schema"`
	InitialState  json.RawMessage  `json:"initial_state,omitempty"`
	ConfigSchema  json.RawMessage  `json:"config_schema,omitempty"`
	OmitState     []string         `json:"omit_state,omitempty"`
	// Interrupt is how the host stops a call past its deadline, with
	// advice when that is the slow path (interruptPath).
	Interrupt string `json:"interrupt"`
}

func runInspect(ctx context.Context, e *env, args []string) error {
	const cmd = "inspect"
	fs := flagSet(e, cmd, helpText{
		usage: "[--json] PLUGIN.wasm",
		summary: "Loads a plugin in the sandbox, granting it nothing but a scratch database, and prints its\n" +
			"ABI, name and version, exports, capabilities, schemas and sha256 (the value to pin it with).",
		examples: []string{"wasmhist inspect sqlite", "wasmhist inspect --json plugins/inmemory/inmemory.wasm"},
		details: "  PLUGIN may be a built-in name, inmemory or sqlite. The file's size and header are checked\n" +
			"  before it is read. The report also says how the host stops a call past its deadline, and\n" +
			"  the build flag to use when that is the slow path.",
	})
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	ps := pluginFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(cmd, "want exactly one PLUGIN.wasm, got %d arguments: use 'wasmhist inspect PLUGIN.wasm'", len(pos))
	}
	path, err := resolvePlugin(e, cmd, pos[0])
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return failf(cmd, "plugin file %s: %w: check the path", path, err)
	}
	h, err := newHost(ctx, e, cmd, ps)
	if err != nil {
		return err
	}
	defer h.Close(context.WithoutCancel(ctx))
	grants, cleanup, err := scratchGrants(cmd)
	if err != nil {
		return err
	}
	defer cleanup()
	p, err := loadPlugin(ctx, e, h, cmd, path, grants, ps)
	if err != nil {
		return err
	}
	info := p.Info()
	r := inspection{
		File: path, SHA256: p.SHA256(), Size: fi.Size(),
		Name: info.Name, Version: info.Version, ABI: info.ABI, HostABI: abi.Version,
		Exports: p.Exports(), Capabilities: info.Capabilities,
		StateVersion: info.StateVersion, StateSchema: info.StateSchema,
		InitialState: info.InitialState, ConfigSchema: info.ConfigSchema, OmitState: info.OmitState,
		Interrupt: interruptPath(path),
	}
	for _, x := range abi.OptionalExports() {
		if !slices.Contains(r.Exports, x) {
			r.Missing = append(r.Missing, x)
		} else if unimplemented(ctx, p, ps.config.raw, x) {
			r.Exports = slices.DeleteFunc(r.Exports, func(e string) bool { return e == x })
			r.Unimplemented = append(r.Unimplemented, x)
			r.Missing = append(r.Missing, x)
		}
	}
	if r.Unimplemented == nil {
		r.Unimplemented = []string{}
	}
	if r.Capabilities == nil {
		r.Capabilities = []abi.Capability{}
	}
	if r.Missing == nil {
		r.Missing = []string{}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printInspection(e.stdout, r)
	return nil
}

// unimplemented probes an optional export with a request that changes
// nothing a session holds (the initial state of a key no session has, in
// the scratch storage inspect grants) and reports whether the plugin
// answers unimplemented, which SPEC section 4 reads as the export being
// absent. Any other answer, an error included, means the plugin implements
// the export.
func unimplemented(ctx context.Context, p *host.Plugin, config json.RawMessage, export string) bool {
	req := map[string]any{"state": p.InitialState()}
	switch export {
	case abi.ExportMigrateState:
		req["from_version"] = 0
	default:
		req["session"] = abi.SessionFacts{SessionID: "wasmhist-inspect", StateKey: "inspect"}
	}
	if export == abi.ExportList {
		req["limit"] = 1
	}
	if len(config) > 0 {
		req["config"] = config
	}
	in, err := json.Marshal(req)
	if err != nil {
		return false
	}
	_, err = p.Call(ctx, export, in)
	return errors.Is(err, abi.ErrUnimplemented)
}

func printInspection(w io.Writer, r inspection) {
	row := func(k, v string) { fmt.Fprintf(w, "%-14s %s\n", k+":", v) }
	row("plugin", r.Name+" "+r.Version)
	row("file", fmt.Sprintf("%s (%d bytes)", r.File, r.Size))
	row("sha256", r.SHA256)
	row("abi", fmt.Sprintf("%s (this host speaks %s)", r.ABI, r.HostABI))
	row("exports", strings.Join(r.Exports, ", "))
	if len(r.Missing) > 0 {
		row("not served", strings.Join(r.Missing, ", ")+" (optional; absent or answering unimplemented)")
	}
	caps := "none"
	if len(r.Capabilities) > 0 {
		var cs []string
		for _, c := range r.Capabilities {
			cs = append(cs, string(c))
		}
		caps = strings.Join(cs, ", ")
	}
	row("capabilities", caps)
	if len(r.OmitState) > 0 {
		row("omit_state", strings.Join(r.OmitState, ", "))
	}
	row("interrupt", r.Interrupt)
	row("state version", fmt.Sprint(r.StateVersion))
	block := func(title string, raw json.RawMessage) {
		fmt.Fprintf(w, "%s:\n", title)
		if len(raw) == 0 {
			fmt.Fprintln(w, "  (none)")
			return
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "  ", "  "); err != nil {
			buf.Reset()
			buf.Write(raw)
		}
		fmt.Fprintf(w, "  %s\n", buf.String())
	}
	block("state schema", r.StateSchema)
	block("initial state", r.InitialState)
	block("config schema", r.ConfigSchema)
}
