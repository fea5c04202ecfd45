package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wasmhist/wasmhist/host"
)

// cacheDirEnv overrides where compiled plugins are cached.
const cacheDirEnv = "WASMHIST_CACHE_DIR"

// maxCacheBytes bounds the compile cache. A compiled plugin takes about
// 29 MB (the in-memory plugin: 11 MB of machine code kept twice, wazero's
// entry and the copy the host maps, then its rewrite, skeleton and initial
// memory), so this keeps the last seventeen or so builds; whatever is
// evicted is compiled again (about 1.5 s) on its next load.
const maxCacheBytes = 512 << 20

// cacheDir is the compile cache the commands use.
func cacheDir(e *env) string {
	if d := e.getenv(cacheDirEnv); d != "" {
		return d
	}
	return host.DefaultCacheDir()
}

// hostCacheDir is the compile cache newHost uses: cacheDir(e) when it can
// be created and written. An unusable $WASMHIST_CACHE_DIR is an error (the
// user chose it, so ignoring it would hide the mistake); an unusable
// default (under a $HOME a service user may lack) is replaced, for this
// run, by a temporary directory, with one note. run removes that
// directory when the command ends.
func hostCacheDir(e *env, cmd string) (string, error) {
	if e.uncached != "" {
		return e.uncached, nil
	}
	dir := cacheDir(e)
	err := checkCacheDir(dir)
	if err == nil {
		return dir, nil
	}
	if e.getenv(cacheDirEnv) != "" {
		return "", failf(cmd, "compile cache %s ($%s): %w: set $%s to a directory you can write, or unset it", dir, cacheDirEnv, err, cacheDirEnv)
	}
	tmp, terr := os.MkdirTemp("", "wasmhist-compile-")
	if terr != nil {
		return "", failf(cmd, "compile cache: %w, and no temporary directory (%w): set $%s to a directory you can write", err, terr, cacheDirEnv)
	}
	e.uncached = tmp
	fmt.Fprintf(e.stderr, "wasmhist %s: note: no compile cache (%v): plugins are compiled for this run only; set $%s to a writable directory to keep them\n", cmd, err, cacheDirEnv)
	return tmp, nil
}

// checkCacheDir checks that this build's subdirectory of the compile cache
// in dir exists, or can be created, and takes new files.
func checkCacheDir(dir string) error {
	sub := filepath.Join(dir, host.CacheSubdir())
	if err := os.MkdirAll(sub, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(sub, ".wasmhist-check-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// cacheFile is one file of the compile cache.
type cacheFile struct {
	path    string
	size    int64
	modTime time.Time
	// current: the file is under this build's subdirectory (pruneCache).
	current bool
}

// cacheFiles lists the regular files under dir, newest first. A missing
// dir is an empty cache. A file linked under several names (the compiled
// code of a plugin, under its own name and its skeleton's) counts its size
// once, for its first name found.
func cacheFiles(dir string) ([]cacheFile, error) {
	var out []cacheFile
	bySize := map[int64][]fs.FileInfo{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && os.IsNotExist(err) {
				return filepath.SkipAll
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		size := fi.Size()
		for _, o := range bySize[size] {
			if os.SameFile(o, fi) {
				size = 0
				break
			}
		}
		bySize[fi.Size()] = append(bySize[fi.Size()], fi)
		out = append(out, cacheFile{path: p, size: size, modTime: fi.ModTime()})
		return nil
	})
	slices.SortFunc(out, func(a, b cacheFile) int { return b.modTime.Compare(a.modTime) })
	return out, err
}

// pruneCache keeps the cache under limit bytes: the code of other runtime
// versions goes first (no build of this host can use it), then the oldest
// files. It is best effort: a file another process removed meanwhile is
// not an error.
func pruneCache(dir string, limit int64) (removed int, err error) {
	files, err := cacheFiles(dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, f := range files {
		total += f.size
	}
	current := filepath.Join(dir, host.CacheSubdir())
	// Whether each file is this version's, found once per file rather than
	// in each comparison of the sort (1.3 M instructions of every command
	// that loads a plugin, with a cache of 15 files).
	for i := range files {
		files[i].current = isUnder(files[i].path, current)
	}
	// Other versions first, then oldest first, within each group.
	slices.SortStableFunc(files, func(a, b cacheFile) int {
		ca, cb := a.current, b.current
		switch {
		case ca != cb && !ca:
			return -1
		case ca != cb:
			return 1
		}
		return a.modTime.Compare(b.modTime)
	})
	for _, f := range files {
		if total <= limit {
			break
		}
		if err := os.Remove(f.path); err == nil || os.IsNotExist(err) {
			total -= f.size
			removed++
		}
	}
	return removed, nil
}

func isUnder(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !filepath.IsAbs(rel) && (len(rel) < 3 || rel[:3] != "../")
}

// cacheReport is what 'cache' prints; its JSON form is --json's.
type cacheReport struct {
	Dir      string   `json:"dir"`
	Current  string   `json:"current_subdir"`
	Files    int      `json:"files"`
	Bytes    int64    `json:"bytes"`
	Limit    int64    `json:"limit_bytes"`
	Versions []string `json:"versions"`
}

func runCache(_ context.Context, e *env, args []string) error {
	const cmd = "cache"
	fs := flagSet(e, cmd, helpText{
		usage: "[show | clear] [--json]",
		summary: "Shows or clears the compile cache: plugins compiled by earlier runs, so that a plugin\n" +
			"loads in tens of milliseconds instead of seconds.",
		examples: []string{"wasmhist cache show", "wasmhist cache clear"},
		details: "  It lives in " + host.DefaultCacheDir() + " (or $" + cacheDirEnv + "), one subdirectory\n" +
			"  per runtime version, about 30 MB per plugin build, and is kept under " + byteSize(maxCacheBytes).String() + ": the\n" +
			"  commands remove other versions' code first, then the oldest. 'clear' removes all of it;\n" +
			"  the next load of each plugin compiles it again. On a terminal, a first compile that\n" +
			"  takes a while is announced.",
	})
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	action := "show"
	switch len(pos) {
	case 0:
	case 1:
		action = pos[0]
	default:
		return usagef(cmd, "want at most one of show or clear, got %d arguments", len(pos))
	}
	dir := cacheDir(e)
	switch action {
	case "show":
	case "clear":
		if err := os.RemoveAll(dir); err != nil {
			return failf(cmd, "clearing %s: %w: check its permissions", dir, err)
		}
		fmt.Fprintf(e.stdout, "cleared %s\n", dir)
		return nil
	default:
		return usagef(cmd, "unknown action %q: use 'wasmhist cache show' or 'wasmhist cache clear'", action)
	}
	files, err := cacheFiles(dir)
	if err != nil {
		return failf(cmd, "reading %s: %w: check its permissions", dir, err)
	}
	r := cacheReport{Dir: dir, Current: host.CacheSubdir(), Files: len(files), Limit: maxCacheBytes, Versions: []string{}}
	for _, f := range files {
		r.Bytes += f.size
	}
	if entries, err := os.ReadDir(dir); err == nil {
		for _, en := range entries {
			if en.IsDir() {
				r.Versions = append(r.Versions, en.Name())
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(e.stdout, "dir:      %s\n", r.Dir)
	fmt.Fprintf(e.stdout, "current:  %s\n", r.Current)
	fmt.Fprintf(e.stdout, "size:     %s in %d files (kept under %s)\n", byteSize(r.Bytes), r.Files, byteSize(r.Limit))
	for _, v := range r.Versions {
		note := "another runtime version: removed first when over the limit"
		if v == r.Current {
			note = "this build's"
		}
		fmt.Fprintf(e.stdout, "version:  %s (%s)\n", v, note)
	}
	return nil
}

// compileNote prints, on a terminal, that this is a plugin's first use:
// its first calls run on wazero's interpreter while it compiles for this
// machine, a second or two of CPU that the process spends before it exits
// and later runs do not repeat. A plugin this build of the command loaded
// before is never announced: a marker named after the module's sha256 in
// the cache's directory for this runtime says so (cache clear removes it
// with the compiled code). stop, called with the load's outcome, writes
// the marker once the plugin loaded.
//
// Reading and hashing the plugin file for that sum costs a warm run on a
// terminal 2-3 ms of CPU (the in-memory plugin's 2.7 MB), as much again as
// the load's own read. So a second marker, named after the file's path and
// stat identity (device, inode, size, modification and change times),
// says that this very file was loaded before, and a run that finds it
// reads nothing. A file written anew has another identity and is hashed
// again; the worst a wrong marker can do is leave a note out.
func compileNote(e *env, cmd, plugin string) (stop func(loaded bool)) {
	if !isTerminal(e.stderr) {
		return func(bool) {}
	}
	marker, seen := "", ""
	later := "later runs load it from the cache in " + cacheDir(e)
	if e.uncached != "" {
		later = "without a compile cache, later runs compile it again"
	} else {
		dir := filepath.Join(cacheDir(e), host.CacheSubdir())
		if seen = seenMarker(dir, plugin); seen != "" {
			if _, err := os.Stat(seen); err == nil {
				return func(bool) {}
			}
		}
		if b, err := os.ReadFile(plugin); err == nil {
			sum := sha256.Sum256(b)
			marker = filepath.Join(dir, hex.EncodeToString(sum[:])+".loaded")
		}
		if _, err := os.Stat(marker); marker != "" && err == nil {
			writeMarker(seen)
			return func(bool) {}
		}
	}
	fmt.Fprintf(e.stderr, "wasmhist %s: first use of %s: compiling it for this machine; %s\n", cmd, filepath.Base(plugin), later)
	return func(loaded bool) {
		if loaded && marker != "" {
			writeMarker(marker)
			writeMarker(seen)
		}
	}
}

// seenMarker names the marker that says the plugin file at path, as it is
// now, was loaded before: the sha256 of its absolute path and stat
// identity. It is "" when the file cannot be examined.
func seenMarker(dir, path string) string {
	id, ok := fileIdentity(path)
	if !ok {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	h := sha256.Sum256([]byte(path + "\x00" + id))
	return filepath.Join(dir, hex.EncodeToString(h[:16])+".seen")
}

func writeMarker(path string) {
	if path != "" {
		os.WriteFile(path, nil, 0o600)
	}
}
