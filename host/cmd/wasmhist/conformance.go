package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// caseTimeout bounds one conformance case, so a plugin that hangs fails its
// case instead of hanging the run (each call is bounded by the host too).
const caseTimeout = 2 * time.Minute

func runConformance(ctx context.Context, e *env, args []string) error {
	const cmd = "conformance"
	fs := flagSet(e, cmd, helpText{
		usage: "[--run REGEXP] [--json] [--older-state FILE]... [flags] PLUGIN.wasm",
		summary: "Runs the conformance suite (sdk/sdktest) against a plugin binary through the host and\n" +
			"prints a pass/fail/skip table; the exit status is 1 when a case fails.",
		examples: []string{"wasmhist conformance inmemory", "wasmhist conformance --run '^describe$' --json sqlite"},
		details: "  Every case loads fresh instances; a plugin that wants sql gets a temporary database.\n" +
			"  A case of an optional export the plugin lacks is skipped. The plugin is judged by the\n" +
			"  ABI minor it declares: findings against later minors' rules are advice, not failures.\n" +
			"  PLUGIN may be a built-in name, inmemory or sqlite. The migrate_state case needs a\n" +
			"  state an older build wrote: --older-state FILE, a JSON object {\"version\": N,\n" +
			"  \"state\": ..., \"messages\": [...]} holding that state and the history it holds.",
	})
	runRE := fs.String("run", "", "run only the cases whose name matches `REGEXP`")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	var older []sdktest.OlderState
	fs.Func("older-state", "check migrate_state with the state an older build wrote, in `FILE` (repeatable)", func(path string) error {
		o, err := readOlderState(path)
		if err == nil {
			older = append(older, o)
		}
		return err
	})
	ps := pluginFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(cmd, "want exactly one PLUGIN.wasm, got %d arguments: use 'wasmhist conformance PLUGIN.wasm'", len(pos))
	}
	var re *regexp.Regexp
	if *runRE != "" {
		if re, err = regexp.Compile(*runRE); err != nil {
			return usagef(cmd, "--run %q: %v: pass a Go regular expression", *runRE, err)
		}
	}
	cfg := ps.config.raw
	path, err := resolvePlugin(e, cmd, pos[0])
	if err != nil {
		return err
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
	opts := host.LoadOptions{Config: cfg, Grants: grants}

	// Load once up front, so that a plugin that cannot load at all gets
	// one clear error rather than the same failure in every case.
	stop := compileNote(e, cmd, path)
	first, err := h.Load(ctx, host.File(path), opts)
	stop(err == nil)
	if err != nil {
		return loadFailure(cmd, path, err, ps)
	}
	report := conformanceReport{
		File: path, Plugin: first.Info().Name, Version: first.Info().Version, SHA256: first.SHA256(),
		Config: cfg, Cases: []caseReport{}, ABI: first.Info().ABI,
	}
	if !*asJSON {
		fmt.Fprintf(e.stdout, "conformance of %s, %s\n\n", describePlugin(first), path)
	}
	first.Close(ctx)

	cases, err := selectCases(cmd, *runRE, re, sdktest.Options{OlderStates: older})
	if err != nil {
		return err
	}
	l, _ := ps.limits(cmd)
	failed, skipped := runCases(ctx, e, h, path, opts, l, cases, &report, *asJSON)
	report.Passed, report.Failed, report.Skipped = len(cases)-failed-skipped, failed, skipped
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return failf(cmd, "writing the report: %w", err)
		}
	} else {
		fmt.Fprintf(e.stdout, "\n%d cases: %d passed, %d failed, %d skipped%s\n", len(cases), report.Passed, failed, skipped, adviceSummary(report))
	}
	if failed > 0 {
		return failf(cmd, "%d of %d cases failed for %s: fix the plugin (each failure above says what a conforming provider does and what this one did)", failed, len(cases), path)
	}
	return nil
}

// readOlderState reads an --older-state file.
func readOlderState(path string) (sdktest.OlderState, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return sdktest.OlderState{}, fmt.Errorf("%w: pass a file an older build's state was saved in", err)
	}
	var f struct {
		Version  *int              `json:"version"`
		State    json.RawMessage   `json:"state"`
		Messages []json.RawMessage `json:"messages"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || f.Version == nil || len(f.State) == 0 || f.Messages == nil {
		why := "it lacks version, state or messages"
		if err != nil {
			why = err.Error()
		}
		return sdktest.OlderState{}, fmt.Errorf("%s: %s: write a JSON object {\"version\": N, \"state\": ..., \"messages\": [...]}", path, why)
	}
	return sdktest.OlderState{Version: *f.Version, State: f.State, Messages: f.Messages}, nil
}

// selectCases returns the cases, with opts, whose name re (--run runRE)
// matches, all of them when re is nil.
func selectCases(cmd, runRE string, re *regexp.Regexp, opts sdktest.Options) ([]sdktest.Case, error) {
	var cases []sdktest.Case
	for _, c := range sdktest.CasesWith(opts) {
		if re == nil || re.MatchString(c.Name) {
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		return nil, usagef(cmd, "--run %q matches no case: run without --run to see the case names", runRE)
	}
	return cases, nil
}

// runCases runs cases against the plugin at path, appends each result to
// report and, unless asJSON, prints it as a table row. It returns the
// numbers of failed and skipped cases.
func runCases(ctx context.Context, e *env, h *host.Host, path string, opts host.LoadOptions, l host.Limits, cases []sdktest.Case, report *conformanceReport, asJSON bool) (failed, skipped int) {
	width := 0
	for _, c := range cases {
		width = max(width, len(c.Name))
	}
	for _, c := range cases {
		v := runCase(ctx, h, path, opts, c)
		cr, status, detail := judgeCase(c, v)
		if a := limitAdvice(v.Err, l); cr.Result == "fail" && a != "" {
			detail += "\n" + a // which limit, and the flag that raises it
		}
		switch cr.Result {
		case "fail":
			failed++
		case "skip":
			skipped++
		}
		report.Advised += len(cr.Advice)
		report.Cases = append(report.Cases, cr)
		if asJSON {
			continue
		}
		fmt.Fprintf(e.stdout, "%s  %-*s  %s\n", status, width, c.Name, c.Doc)
		if detail != "" {
			for _, line := range strings.Split(strings.TrimSpace(detail), "\n") {
				fmt.Fprintf(e.stdout, "      %s\n", strings.TrimSpace(line))
			}
		}
	}
	return failed, skipped
}

// conformanceReport is the --json output of conformance.
type conformanceReport struct {
	File    string          `json:"file"`
	Plugin  string          `json:"plugin"`
	Version string          `json:"version"`
	SHA256  string          `json:"sha256"`
	Config  json.RawMessage `json:"config,omitempty"`
	Cases   []caseReport    `json:"cases"`
	Passed  int             `json:"passed"`
	Failed  int             `json:"failed"`
	Skipped int             `json:"skipped"`
	// ABI is the version the plugin declares, by whose rules it is judged;
	// Advised counts the advice lines of later minors' rules.
	ABI     string `json:"abi"`
	Advised int    `json:"advised"`
}

// caseReport is one case's outcome: pass, fail (with the case's reason
// code when it gave one) or skip.
type caseReport struct {
	Name   string `json:"name"`
	Doc    string `json:"doc"`
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Since is the ABI version that introduced the case; Advice what it
	// found against rules of later minors than the plugin declares.
	Since  string         `json:"since"`
	Advice []adviceReport `json:"advice,omitempty"`
}

// runCase runs one case with a factory whose subjects are separate loads
// of the plugin (so separate instances), closed when the case ends.
func runCase(ctx context.Context, h *host.Host, path string, opts host.LoadOptions, c sdktest.Case) sdktest.Verdict {
	ctx, cancel := context.WithTimeout(ctx, caseTimeout)
	defer cancel()
	var mu sync.Mutex
	var loaded []*host.Plugin
	defer func() {
		for _, p := range loaded {
			p.Close(context.WithoutCancel(ctx))
		}
	}()
	factory := func(ctx context.Context) (sdktest.Subject, error) {
		p, err := h.Load(ctx, host.File(path), opts)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		loaded = append(loaded, p)
		mu.Unlock()
		return configured{Plugin: p, config: opts.Config}, nil
	}
	return c.Judge(ctx, factory)
}

// configured is a loaded plugin that tells the suite its config, so that
// the requests the suite builds itself (list, clear, migrate_state) carry
// the config as the host's own calls do.
type configured struct {
	*host.Plugin
	config json.RawMessage
}

func (c configured) Config() json.RawMessage { return c.config }

var _ sdktest.ConfigSubject = configured{}
var _ sdktest.ExportsSubject = configured{}
