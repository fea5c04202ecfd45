package host

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/loader"
	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/host/internal/statepatch"
	"github.com/wasmhist/wasmhist/host/internal/wasmrt"
)

// Grant gives a loaded plugin one capability, with its settings (for sql:
// which database). A plugin may use only what its LoadOptions grant.
//
// Grants are made by the package of each capability, e.g. sqlgrant.New;
// importing that package is what links the capability into the program.
// The interface is sealed: other implementations cannot be written.
type Grant interface {
	// Capability is the capability granted.
	Capability() abi.Capability
	internal() capability.Grant
}

// sealedGrant is the only Grant.
type sealedGrant struct{ g capability.Grant }

func (s sealedGrant) Capability() abi.Capability { return s.g.Capability() }
func (s sealedGrant) internal() capability.Grant { return s.g }

func init() {
	capability.Seal = func(g capability.Grant) any { return sealedGrant{g} }
}

// internalGrants unwraps grants, refusing a nil one.
func internalGrants(gs []Grant) ([]capability.Grant, error) {
	out := make([]capability.Grant, 0, len(gs))
	for i, g := range gs {
		if g == nil {
			return nil, fmt.Errorf("%w: grant %d is nil", ErrInvalidConfig, i)
		}
		out = append(out, g.internal())
	}
	return out, nil
}

// LoadOptions configure one loaded plugin.
type LoadOptions struct {
	// SHA256 pins the plugin's bytes (hex). A plugin whose sum differs is
	// refused with ErrChecksumMismatch naming both sums. Empty: no pin.
	// Ignored by LoadNative.
	SHA256 string
	// Config is the operator's configuration of the plugin, validated at
	// load against the plugin's config_schema and sent with every call.
	// Empty: none (validated as {}).
	Config json.RawMessage
	// Grants are the capabilities the plugin may use. A plugin that asks in
	// describe for a capability not granted here fails to load with
	// ErrCapabilityDenied.
	Grants []Grant
	// Limits override the host's limits for this plugin; zero fields keep
	// the host's.
	Limits Limits
}

// Load checks, compiles and instantiates a WebAssembly plugin. Before any
// plugin code runs it checks the pin and the module's exports (the ABI
// marker and required exports) and imports; then it creates the first
// instance and calls describe, so that every load error surfaces here.
//
// A plugin the compilation cache does not hold yet runs its first calls
// on wazero's interpreter while it is compiled in a process of its own:
// the program's executable, run again with WASMHIST_COMPILE_PROCESS=1 in
// its environment, which the host recognises before main runs. That
// process is stopped past 10 s of CPU or 512 MiB: the plugin then stays on
// the interpreter (Plugin.Compiled returns the ErrCompileLimit error), the
// cache records the refusal, and every later load of the module fails
// with ErrInvalidPlugin and ErrCompileLimit.
func (h *Host) Load(ctx context.Context, src PluginSource, opts LoadOptions) (*Plugin, error) {
	start := time.Now()
	p, err := h.load(ctx, src, opts)
	if err != nil {
		h.log.WarnContext(ctx, "plugin load failed", "source", src.String(), "error", err)
		return nil, fmt.Errorf("host: load %s: %w", src, err)
	}
	h.log.DebugContext(ctx, "plugin loaded", "plugin", p.name, "version", p.info.Version, "sha256", p.sum, "exports", p.exports, "duration", time.Since(start))
	return p, nil
}

func (h *Host) load(ctx context.Context, src PluginSource, opts LoadOptions) (*Plugin, error) {
	limits, err := h.limits(opts)
	if err != nil {
		return nil, err
	}
	grants, err := internalGrants(opts.Grants)
	if err != nil {
		return nil, err
	}
	sum, wasm, err := src.sum(h.cache)
	if err != nil {
		return nil, err
	}
	if err := loader.CheckPin(sum, opts.SHA256); err != nil {
		return nil, err
	}
	// The loader's checks of the sections, from the cache's record when
	// the bytes are not read (wasmrt.Cache.KeepSections).
	sections, ok := (*loader.Sections)(nil), false
	if wasm == nil {
		if sections, ok = h.cache.Sections(sum); !ok {
			if wasm, err = src.readSum(h.cache, sum); err != nil {
				return nil, err
			}
		}
	}
	if !ok {
		if sections, err = loader.ReadSections(wasm); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidPlugin, err)
		}
		if src.path != "" {
			h.cache.KeepSections(sum, sections)
		}
	}
	var capNames []string
	for _, f := range h.backends.Funcs() {
		capNames = append(capNames, f.Name)
	}
	static, err := loader.CheckSections(src.String(), sections, capNames)
	if err != nil {
		return nil, err
	}
	mod, err := h.engine.CompileFrom(ctx, sum, func() ([]byte, error) {
		if wasm != nil {
			return wasm, nil
		}
		return src.readSum(h.cache, sum)
	}, limits.MemoryPages)
	switch {
	case errors.Is(err, wasmrt.ErrClosed):
		return nil, ErrClosed
	case errors.As(err, new(sourceError)):
		// The file changed or went away; the plugin is not to blame.
		return nil, err
	case errors.Is(err, wasmrt.ErrCompileProcess):
		// The host's environment failed, not the plugin.
		return nil, err
	case err != nil && ctx.Err() != nil:
		// The caller gave up; the plugin is not to blame.
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidPlugin, err)
	}
	p := h.newPlugin(src.String(), opts, grants, limits, newWasmBackend(mod, limits))
	p.sum = hex.EncodeToString(sum[:])
	p.exports = static.Exports
	if err := h.finish(ctx, p); err != nil {
		p.backend.close(ctx)
		if static.Command && errors.Is(err, ErrTrap) {
			return nil, fmt.Errorf("%w: %w", err, loader.ErrCommand)
		}
		return nil, err
	}
	if mod.Interpreted() {
		go h.logCompiled(context.WithoutCancel(ctx), p, mod)
	}
	return p, nil
}

// logCompiled waits for the compilation of a plugin served on the
// interpreter meanwhile (its first use; every limit holds alike on both)
// and logs how it ended. The engine ends it, at the latest when it closes.
func (h *Host) logCompiled(ctx context.Context, p *Plugin, mod *wasmrt.Module) {
	<-mod.Compiled()
	if err := mod.CompileErr(); err != nil {
		h.log.WarnContext(ctx, "plugin stays on the interpreter: its compilation failed", "plugin", p.name, "sha256", p.sum, "error", err)
		return
	}
	h.log.DebugContext(ctx, "plugin compiled: new instances run the compiled code", "plugin", p.name, "sha256", p.sum)
}

// LoadNative loads a plugin whose exports run in process through h, on the
// same code path as a WebAssembly plugin: describe, validation, limits on
// input and output sizes, state handling. It is the native build of a
// plugin written with package sdk, for conformance runs and as the floor
// of benchmarks. The call deadline is applied through the context only; a
// native handler is trusted to honour it.
func (h *Host) LoadNative(ctx context.Context, name string, handler abi.Handler, opts LoadOptions) (*Plugin, error) {
	limits, err := h.limits(opts)
	if err != nil {
		return nil, fmt.Errorf("host: load %s: %w", name, err)
	}
	if handler == nil {
		return nil, fmt.Errorf("host: load %s: %w: nil handler", name, ErrInvalidConfig)
	}
	grants, err := internalGrants(opts.Grants)
	if err != nil {
		return nil, fmt.Errorf("host: load %s: %w", name, err)
	}
	p := h.newPlugin(name, opts, grants, limits, nativeBackend{h: handler})
	p.exports = append(append([]string(nil), abi.RequiredExports()...), abi.OptionalExports()...)
	if err := h.finish(ctx, p); err != nil {
		return nil, fmt.Errorf("host: load %s: %w", name, err)
	}
	h.log.DebugContext(ctx, "native plugin loaded", "plugin", p.name, "version", p.info.Version)
	return p, nil
}

func (h *Host) limits(opts LoadOptions) (Limits, error) {
	l := opts.Limits.withDefaults(h.cfg.Limits)
	return l, l.validate()
}

func (h *Host) newPlugin(name string, opts LoadOptions, grants []capability.Grant, limits Limits, b backend) *Plugin {
	return &Plugin{
		host:    h,
		name:    name,
		grants:  grants,
		config:  opts.Config,
		limits:  limits,
		backend: b,
		log:     h.log,
		docs:    statepatch.NewCache(16),
		// A window by value is small: a megabyte holds a few thousand
		// messages of it, however long the history.
		provided: decodedMessages{floor: 1 << 20},
	}
}

// finish describes the plugin and validates what it said and the config.
func (h *Host) finish(ctx context.Context, p *Plugin) error {
	var info *abi.PluginInfo
	err := p.invoke(ctx, abi.ExportDescribe, nil, func(_ context.Context, out []byte) (err error) {
		info, err = decodeInfo(out)
		return err
	})
	if err != nil {
		return err
	}
	var granted []abi.Capability
	for _, g := range p.grants {
		granted = append(granted, g.Capability())
	}
	var available []abi.Capability
	for _, f := range h.backends.Funcs() {
		available = append(available, f.Capability)
	}
	if err := loader.CheckInfo(p.name, info, granted, available); err != nil {
		return err
	}
	p.name, p.info = info.Name, *info
	if p.stateSchema, err = schema.Compile(info.StateSchema, info.Name+" state_schema"); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidPlugin, info.Name, err)
	}
	p.initial = json.RawMessage(`{}`)
	if !isNull(info.InitialState) {
		p.initial = info.InitialState
	}
	if err := p.checkInitial(ctx); err != nil {
		return err
	}
	if err := p.checkConfig(ctx); err != nil {
		return err
	}
	p.omitState = map[string]bool{}
	for _, e := range info.OmitState {
		p.omitState[e] = true
	}
	return h.track(p)
}

// checkInitial validates initial_state against state_schema within a
// call's deadline of its own, as a state a call returns is: the schema is
// the plugin's.
func (p *Plugin) checkInitial(ctx context.Context) error {
	vctx, cancel := context.WithTimeout(ctx, p.limits.CallTimeout)
	defer cancel()
	err := p.validateState(vctx, p.initial)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("host: %s: validating initial_state: %w", p.info.Name, ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s: validating initial_state with state_schema took longer than the call timeout (%v): simplify either", ErrInvalidPlugin, p.info.Name, p.limits.CallTimeout)
	}
	return fmt.Errorf("%w: %s: initial_state: %w", ErrInvalidPlugin, p.info.Name, err)
}

// checkConfig validates the operator's config against config_schema (by
// default: any object), within a call's deadline of its own.
func (p *Plugin) checkConfig(ctx context.Context) error {
	cfg := p.config
	if isNull(cfg) {
		p.config = nil
		cfg = json.RawMessage(`{}`)
	}
	raw := p.info.ConfigSchema
	if isNull(raw) {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	s, err := schema.Compile(raw, p.name+" config_schema")
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidPlugin, p.name, err)
	}
	vctx, cancel := context.WithTimeout(ctx, p.limits.CallTimeout)
	defer cancel()
	err = s.ValidateContext(vctx, cfg)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return fmt.Errorf("host: %s: validating the config: %w", p.name, ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: plugin %s: validating the config with config_schema took longer than the call timeout (%v): simplify the config or the schema", ErrInvalidConfig, p.name, p.limits.CallTimeout)
	default:
		return fmt.Errorf("%w: plugin %s: %w", ErrInvalidConfig, p.name, err)
	}
	return nil
}
