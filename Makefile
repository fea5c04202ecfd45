# wasmhist build and test entry points. `make test` is what CI runs.
GO        ?= go
WASM_ENV  := GOOS=wasip1 GOARCH=wasm
PLUGINS   := inmemory sqlite
FUZZTIME  ?= 2m

.PHONY: all plugins go-plugins test test-under-load check fuzz bench clean install

# Where `make install` puts the sample plugins: the data directory the
# command searches, $XDG_DATA_HOME/wasmhist or ~/.local/share/wasmhist.
DATADIR   ?= $(if $(XDG_DATA_HOME),$(XDG_DATA_HOME),$(HOME)/.local/share)/wasmhist

all: plugins

# Every sample plugin as a .wasm next to its source (ignored by git): the Go
# ones (go-plugins, all that demo and install need: Go alone builds them),
# and the AssemblyScript one, built with the compiler and the Extism kit
# that its package-lock.json pins (npm ci, which needs Node.js and npm;
# node_modules is ignored by git and reinstalled only when the lock file
# changes).
plugins: go-plugins plugins/asmemory/asmemory.wasm

go-plugins:
	@for p in $(PLUGINS); do \
		echo "building plugins/$$p/$$p.wasm"; \
		$(WASM_ENV) $(GO) build -buildmode=c-shared -o plugins/$$p/$$p.wasm ./plugins/$$p || exit 1; \
	done

plugins/asmemory/node_modules/.package-lock.json: plugins/asmemory/package.json plugins/asmemory/package-lock.json
	cd plugins/asmemory && npm ci --no-audit --no-fund

plugins/asmemory/asmemory.wasm: plugins/asmemory/node_modules/.package-lock.json $(wildcard plugins/asmemory/assembly/*.ts)
	@echo "building plugins/asmemory/asmemory.wasm"
	cd plugins/asmemory && npm run --silent build

# The command into $(go env GOBIN) (or GOPATH/bin) and the sample plugins
# into $(DATADIR)/plugins, where the installed command finds them from any
# directory; then the installed command inspects each, which compiles it
# into the compile cache the command uses ($WASMHIST_CACHE_DIR, or its
# default), so that no first run pays for the compilation.
BINDIR    ?= $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)

install: go-plugins
	$(GO) install ./host/cmd/wasmhist
	mkdir -p $(DATADIR)/plugins
	@for p in $(PLUGINS); do cp plugins/$$p/$$p.wasm $(DATADIR)/plugins/ || exit 1; echo "installed $(DATADIR)/plugins/$$p.wasm"; done
	@for p in $(PLUGINS); do $(BINDIR)/wasmhist inspect $(DATADIR)/plugins/$$p.wasm >/dev/null || exit 1; echo "compiled $(DATADIR)/plugins/$$p.wasm into the compile cache"; done

# The sandbox's timing bounds (a call ends within 50 ms of its deadline, a
# collection waits no longer, nor for a copy of a large state) are checked
# with the machine to themselves:
# after every other test, not beside another package's race-instrumented
# tests on the same cores.
BOUNDS = ^(FuzzDeadlineBound|TestDeadlineHolds.*|TestStoppableInSteps)$$

test: plugins
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m -skip '$(BOUNDS)' ./...
	$(GO) test -race -count=1 -run '$(BOUNDS)' ./host/internal/wasmrt/ ./host/internal/bulk/

# The SQLite concurrency tests once more on a machine loaded by busy loops
# (four per core): every wait for a file's write lock ends in a commit or in
# txn.ErrBusy, never in a time limit charged to a plugin. The loops are
# killed by their process ids when the tests end.
test-under-load: plugins
	@pids=""; for i in $$(seq $$((4 * $$(nproc)))); do (while :; do :; done) & pids="$$pids $$!"; done; \
	trap 'kill $$pids' EXIT; \
	$(GO) test -count=1 -run '^TestConcurrentProcessesOneSession$$/^(file|sqlite-same-db|sqlite-other-db|postgres-same-db)$$' ./host/agent/ && \
	$(GO) test -count=1 -run '^(TestManyProcessesOneFile|TestConcurrentChatsOneSQLiteStore)$$' ./host/internal/sqlcap/ ./host/cmd/wasmhist/

# Static checks; fails on a dirty tree so CI sees what a developer forgot.
check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	$(WASM_ENV) $(GO) build ./abi/... ./sdk/... ./plugins/... ./internal/guestjson/...
	@# Every `pkg.Name` written in backticks in the Markdown files exists, and
	@# every RATIONALE entry a Go comment names by its title.
	$(GO) run ./internal/docnames
	@# -e: a test-only dependency of modernc.org/sqlite's own tests is not
	@# served by the module proxy; it is never built into wasmhist.
	$(GO) mod tidy -e
	@git diff --exit-code -- go.mod go.sum || (echo "go mod tidy changed go.mod/go.sum"; exit 1)
	@test -z "$$(git status --porcelain)" || (git status --porcelain; echo "tree is dirty"; exit 1)

# Runs every fuzz target for FUZZTIME each (go test runs one target at a time).
fuzz:
	@for spec in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h '^func Fuzz' $$spec/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz $$spec $$f"; \
			$(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$spec || exit 1; \
		done; \
	done

# Benchmarks as recorded in BENCHMARKS.md (see there for benchstat usage).
# The comparison with hashicorp/go-plugin lives in bench/peer, a module of its
# own so that the main module never requires go-plugin or gRPC; ./... does
# not descend into it.
bench: plugins
	$(GO) test -run='^$$' -bench=. -benchmem -count=6 ./... | tee bench.txt
	cd bench/peer && $(GO) test -run='^$$' -bench=PeerTurn -benchmem -benchtime=200x -count=6 . | tee -a ../../bench.txt
	cd bench/peer && $(GO) test -run='^$$' -bench=PeerLoadFreshProcess -benchtime=5x -count=6 . | tee -a ../../bench.txt

clean:
	rm -f plugins/*/*.wasm bench.txt
	rm -rf plugins/asmemory/node_modules

# The main job on a fresh machine: build the plugins and the command, tell
# the offline model something in one process, with the history persisted by
# the sqlite plugin, then ask about it from a new process that resumes the
# session. The files stay in $TMPDIR/wasmhist-demo for a look afterwards.
# demo-intro comes first so that a fresh machine, silent for minutes while
# Go compiles SQLite, has said why.
.PHONY: demo demo-intro
demo: demo-intro go-plugins
	@echo "building ./wasmhist (go build ./host/cmd/wasmhist)"
	$(GO) build -o wasmhist ./host/cmd/wasmhist
	@d="$${TMPDIR:-/tmp}/wasmhist-demo"; rm -rf "$$d" && mkdir -p "$$d" || exit 1; \
	run() { printf '\n$$'; for a in "$$@"; do case "$$a" in *" "*) printf " '%s'" "$$a";; *) printf ' %s' "$$a";; esac; done; echo; "$$@" || exit 1; }; \
	echo "# the sample plugins, as --plugin finds them by name, compiled into the compile cache"; \
	for p in $(PLUGINS); do ./wasmhist inspect $$p >/dev/null || exit 1; done; \
	echo; echo "# first process: a new session, history kept by the sqlite plugin"; \
	run ./wasmhist chat --plugin sqlite --session "$$d/demo.json" -m "I like Italian food"; \
	echo; echo "# another process resumes the session: the offline model answers from the stored history"; \
	run ./wasmhist chat --session "$$d/demo.json" -m "What food do I like?"; \
	run ./wasmhist chat --session "$$d/demo.json" -m "What is 6*7?"; \
	echo; echo "# what the plugin stored, read back through its list export"; \
	run ./wasmhist history --session "$$d/demo.json"

demo-intro:
	@echo "make demo: building the Go sample plugins (plugins/inmemory, plugins/sqlite) and the command (./wasmhist), then"
	@echo "running a conversation with the offline model and resuming it in a new process."
	@echo "The first build on a machine compiles SQLite (modernc.org/sqlite, pure Go) for the command and"
	@echo "the sqlite plugin: about 7 minutes and 2.8 GB of memory on 2 cores, silent while go build works;"
	@echo "later builds take seconds."
