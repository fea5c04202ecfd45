// Package sdktest is the conformance kit for history-provider plugins.
//
// Cases returns the conformance suite: named checks that every provider
// must pass (what it stores comes back in order; its state survives any
// JSON library; state keys stay apart; unknown fields are tolerated; it
// works from its initial state; any instance serves any call; malformed
// requests get invalid_argument; a history stored as an importer stores it,
// and stores that split a tool call from its result, are kept as given).
// The failure cases (a rolled-back run, a retried one, two instances, a
// crashed instance) need a RunSubject and are skipped on other subjects. Each case drives a plugin only through
// the Subject interface, which the host's *host.Plugin implements for both
// WebAssembly and native plugins, so one suite checks a plugin's Go code
// and its .wasm build alike.
//
// From go test, Run runs every case as a subtest:
//
//	wasm := sdktest.BuildPlugin(t, "example.com/myplugin")
//	sdktest.Run(t, func(ctx context.Context) (sdktest.Subject, error) {
//		return h.Load(ctx, host.File(wasm), host.LoadOptions{})
//	})
//
// The cases of the optional exports (list, clear, migrate_state) run only
// when the plugin implements the export, and are skipped otherwise.
//
// Tools run the cases themselves: each Case.Run returns nil, a *Skipped
// (see IsSkipped), or a *Failure naming the case and one of the reason
// codes the case documents, wrapping what the provider did wrong. A plugin is
// judged by the ABI minor it declares: Case.Judge also returns the Advice a
// case found against rules of later minors, which never fail it.
// BuildPlugin compiles a plugin package to
// WebAssembly for tests.
package sdktest
