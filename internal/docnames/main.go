// Command docnames reports every Go name written in backticks in the
// repository's Markdown files (`pkg.Name`, `pkg.Type.Method`,
// `pkg.Type.Field`) that does not exist in the code, so a document that
// still names a moved or renamed identifier fails `make check`.
//
// A package name resolves among the module's packages, the packages they
// and their tests import, and the standard library; a name resolves when
// any package of that name declares it. Declarations are read from the
// source with go/parser, not type-checked: that keeps a run near a second
// (go/packages with types takes several), and a name's existence is all
// the check needs. Methods and fields promoted through embedding and
// aliases are followed, within and across packages.
//
// It also checks that every RATIONALE.md entry a Go comment names by its
// title exists, and that a file's table of contents (between the lines of
// tocStart and tocEnd) lists its headings, and writes it with -toc.
//
// Usage, from the module root:
//
//	go run ./internal/docnames [FILE.md ...]
//	go run ./internal/docnames -toc FILE.md ...
//
// Without arguments it checks every *.md file under the current directory
// except those under testdata, hidden directories and other modules.
// Code spans inside fenced code blocks are not checked: those are examples,
// compiled where it matters by tests of their own.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-toc" {
		for _, f := range os.Args[2:] {
			if err := writeTOC(f); err != nil {
				fmt.Fprintln(os.Stderr, "docnames:", err)
				os.Exit(1)
			}
		}
		return
	}
	stale, err := run(".", os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docnames:", err)
		os.Exit(2)
	}
	if stale > 0 {
		fmt.Fprintf(os.Stderr, "docnames: %d stale name(s) or table(s) of contents in Markdown; fix each as its line advises\n", stale)
		os.Exit(1)
	}
}

// run checks files (all Markdown under root when empty, and then also that
// README.md's layout names every package directory and that every
// RATIONALE entry a Go comment names exists) and writes one line per
// stale name to out; it returns how many it found.
func run(root string, files []string, out io.Writer) (int, error) {
	whole := len(files) == 0
	if whole {
		var err error
		if files, err = markdownFiles(root); err != nil {
			return 0, err
		}
	}
	idx, err := loadIndex(root)
	if err != nil {
		return 0, err
	}
	stale := 0
	if whole {
		msgs, err := checkLayout(filepath.Join(root, "README.md"), idx.dirs)
		if err != nil {
			return stale, err
		}
		for _, m := range msgs {
			fmt.Fprintln(out, m)
			stale++
		}
		if msgs, err = checkRationale(root); err != nil {
			return stale, err
		}
		for _, m := range msgs {
			fmt.Fprintln(out, m)
			stale++
		}
	}
	for _, f := range files {
		msg, err := checkTOC(f)
		if err != nil {
			return stale, err
		}
		if msg != "" {
			fmt.Fprintln(out, msg)
			stale++
		}
		refs, err := scanFile(f)
		if err != nil {
			return stale, err
		}
		for _, r := range refs {
			if msg := idx.check(r); msg != "" {
				fmt.Fprintf(out, "%s:%d: %s\n", f, r.line, msg)
				stale++
			}
		}
	}
	return stale, nil
}

// markdownFiles lists the *.md files under root, skipping testdata,
// hidden directories and nested modules (bench/peer has a go.mod of its own).
func markdownFiles(root string) ([]string, error) { return filesOf(root, ".md") }

// filesOf lists the files under root whose names end in suffix, skipping
// the directories skipDir names.
func filesOf(root, suffix string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, suffix) {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// skipDir reports whether the walk skips the directory at path, named
// name: testdata, hidden directories, node_modules and nested modules
// (bench/peer has a go.mod of its own).
func skipDir(path, name string) bool {
	if name == "testdata" || strings.HasPrefix(name, ".") || name == "node_modules" {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// ref is one name found in a Markdown file.
type ref struct {
	line   int
	text   string // as written, e.g. "sql.DB.BeginTx"
	dir    string // the directory written in front of pkg, e.g. "sdk" in `sdk/sql.Rebind`
	pkg    string // "sql"
	name   string // "DB"
	member string // "BeginTx", or empty
	// whole is true when the code span is the name alone (perhaps with a
	// pointer or slice prefix, or call arguments): then pkg must be a
	// package. A name inside a longer expression may be a variable's
	// field (`r.Context`), so there an unknown pkg is not reported.
	whole bool
}

var (
	fence = regexp.MustCompile("^\\s*(```|~~~)")
	// A code span: a run of backticks, content, the same run.
	span = regexp.MustCompile("(`+)([^`]+?)(`+)")
	// pkg.Name or pkg.Type.Member anywhere in a span, not preceded by an
	// identifier character or a dot (so `a.b.C` yields nothing for b.C).
	// A directory path in front (`sdk/sql.Rebind`, `encoding/json.Valid`)
	// names the package by its path instead.
	qualified = regexp.MustCompile(`(^|[^A-Za-z0-9_./])((?:[a-z0-9_.-]+/)*)([a-z][a-z0-9_]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?`)
	// A span that is one qualified name: optional *, & or [] in front,
	// optional arguments, type arguments or composite literal after.
	wholeSpan = regexp.MustCompile(`^[*&\[\]]*(?:[a-z0-9_.-]+/)*[a-z][a-z0-9_]*\.[A-Z][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?([({\[].*)?$`)
)

// scanFile returns the qualified names in the code spans of a Markdown
// file, outside fenced code blocks.
func scanFile(path string) ([]ref, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var refs []ref
	inFence := false
	for i, line := range strings.Split(string(data), "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range span.FindAllStringSubmatch(line, -1) {
			if len(m[1]) != len(m[3]) {
				continue
			}
			content := strings.TrimSpace(m[2])
			whole := wholeSpan.MatchString(content)
			for j, q := range qualified.FindAllStringSubmatch(content, -1) {
				text := q[2] + q[3] + "." + q[4]
				if q[5] != "" {
					text += "." + q[5]
				}
				refs = append(refs, ref{line: i + 1, text: text, dir: strings.TrimSuffix(q[2], "/"), pkg: q[3], name: q[4], member: q[5], whole: whole && j == 0})
			}
		}
	}
	return refs, nil
}

// listed is what go list reports of a package.
type listed struct {
	ImportPath     string
	Name           string
	Dir            string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
	Standard       bool
}

// index maps package names to packages and reads a package's declarations
// on first use.
type index struct {
	byName map[string][]*pkgDecls
	byPath map[string]*pkgDecls
	module string // the module's path
	// dirs are the module's package directories, relative to its root
	// ("host/agent"), commands and test-only packages included.
	dirs []string
}

// pkgDecls holds one package's exported declarations.
type pkgDecls struct {
	listed
	loaded bool
	// names are the package-level names.
	names map[string]bool
	// members are each type's methods and fields.
	members map[string]map[string]bool
	// embeds are each type's embedded types and alias targets, as
	// (import path, type name); import path "" is this package.
	embeds map[string][][2]string
}

func loadIndex(root string) (*index, error) {
	idx := &index{byName: map[string][]*pkgDecls{}, byPath: map[string]*pkgDecls{}}
	cmd := exec.Command("go", "list", "-m")
	cmd.Dir = root
	mod, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", err)
	}
	idx.module = strings.TrimSpace(string(mod))
	for _, args := range [][]string{
		{"-deps", "-test", "./..."},
		{"std"},
	} {
		cmd := exec.Command("go", append([]string{"list", "-e", "-json=ImportPath,Name,Dir,GoFiles,CgoFiles,IgnoredGoFiles,Standard"}, args...)...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		outb, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		dec := json.NewDecoder(bytes.NewReader(outb))
		for {
			var p listed
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("go list %s: %w", strings.Join(args, " "), err)
			}
			if rel, ok := strings.CutPrefix(p.ImportPath, idx.module+"/"); ok && args[0] == "-deps" &&
				!strings.Contains(p.ImportPath, " ") && !strings.HasSuffix(p.ImportPath, ".test") {
				idx.dirs = append(idx.dirs, rel)
			}
			// Test variants ("p [p.test]") and test mains repeat or add
			// nothing a reader names; internal and vendored copies of the
			// standard library are not API.
			if strings.Contains(p.ImportPath, " ") || strings.HasSuffix(p.ImportPath, ".test") ||
				p.Name == "main" || p.Name == "" || strings.HasPrefix(p.ImportPath, "vendor/") ||
				(p.Standard && strings.Contains(p.ImportPath, "internal")) {
				continue
			}
			if _, ok := idx.byPath[p.ImportPath]; ok {
				continue
			}
			d := &pkgDecls{listed: p}
			idx.byPath[p.ImportPath] = d
			idx.byName[p.Name] = append(idx.byName[p.Name], d)
		}
	}
	return idx, nil
}

// check returns the advice for a stale reference, or "" when it resolves.
func (idx *index) check(r ref) string {
	pkgs := idx.byName[r.pkg]
	if r.dir != "" {
		pkgs = nil
		path := r.dir + "/" + r.pkg
		for _, p := range []string{idx.module + "/" + path, path} {
			if q := idx.byPath[p]; q != nil {
				pkgs = append(pkgs, q)
			}
		}
		if len(pkgs) == 0 {
			return fmt.Sprintf("`%s`: no package %s in the module or the standard library; write the package's present path (go list ./...)", r.text, path)
		}
	}
	if len(pkgs) == 0 {
		if !r.whole {
			return ""
		}
		return fmt.Sprintf("`%s`: no package %s in the module, its imports or the standard library; write the package's present name (go list ./...), or drop the backticks if it is not Go", r.text, r.pkg)
	}
	var paths []string
	for _, p := range pkgs {
		idx.load(p)
		paths = append(paths, p.ImportPath)
		if !p.names[r.name] {
			continue
		}
		if r.member == "" || idx.hasMember(p, r.name, r.member, 0) {
			return ""
		}
	}
	for i, p := range paths {
		paths[i] = idx.short(p)
	}
	sort.Strings(paths)
	for _, p := range pkgs {
		if p.names[r.name] {
			return fmt.Sprintf("`%s`: %s.%s has no method or field %s; write the present name (go doc %s.%s)", r.text, r.pkg, r.name, r.member, idx.short(p.ImportPath), r.name)
		}
	}
	return fmt.Sprintf("`%s`: package %s declares no %s; write the present name (go doc %s)", r.text, strings.Join(paths, ", "), r.name, paths[0])
}

// short writes a module package's path from the module root (./host), as
// go doc accepts it there.
func (idx *index) short(path string) string {
	if rest, ok := strings.CutPrefix(path, idx.module+"/"); ok {
		return "./" + rest
	}
	return path
}

// hasMember reports whether type typ of p has member, directly or through
// an embedded type or alias.
func (idx *index) hasMember(p *pkgDecls, typ, member string, depth int) bool {
	if depth > 10 {
		return false
	}
	if p.members[typ][member] {
		return true
	}
	for _, e := range p.embeds[typ] {
		q := p
		if e[0] != "" {
			if q = idx.byPath[e[0]]; q == nil {
				// A type embedded from a package outside the index
				// (unusual): its members cannot be checked, so accept.
				return true
			}
			idx.load(q)
		}
		if e[1] == member || idx.hasMember(q, e[1], member, depth+1) {
			return true
		}
	}
	return false
}

// load parses p's source files once. Files excluded by build constraints
// count too (a name declared only for wasip1 or windows still exists), as
// long as they belong to the package.
func (idx *index) load(p *pkgDecls) {
	if p.loaded {
		return
	}
	p.loaded = true
	p.names = map[string]bool{}
	p.members = map[string]map[string]bool{}
	p.embeds = map[string][][2]string{}
	fset := token.NewFileSet()
	var files []string
	files = append(files, p.GoFiles...)
	files = append(files, p.CgoFiles...)
	files = append(files, p.IgnoredGoFiles...)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil || f.Name.Name != p.Name {
			continue
		}
		p.addFile(f, idx.nameOf)
	}
}

func (p *pkgDecls) member(typ, name string) {
	if p.members[typ] == nil {
		p.members[typ] = map[string]bool{}
	}
	p.members[typ][name] = true
}

// nameOf is the package name of an import path ("" when unknown): it
// differs from the path's last element for github.com/extism/go-sdk
// (extism) and github.com/jackc/pgx/v5 (pgx).
func (idx *index) nameOf(path string) string {
	if p := idx.byPath[path]; p != nil {
		return p.Name
	}
	return ""
}

func (p *pkgDecls) addFile(f *ast.File, nameOf func(path string) string) {
	imports := map[string]string{}
	for _, im := range f.Imports {
		path := strings.Trim(im.Path.Value, `"`)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		} else if q := nameOf(path); q != "" {
			name = q
		}
		imports[name] = path
	}
	// typeRef resolves a type expression to (import path, name).
	typeRef := func(e ast.Expr) ([2]string, bool) {
		for {
			switch t := e.(type) {
			case *ast.StarExpr:
				e = t.X
				continue
			case *ast.IndexExpr:
				e = t.X
				continue
			case *ast.IndexListExpr:
				e = t.X
				continue
			case *ast.Ident:
				return [2]string{"", t.Name}, true
			case *ast.SelectorExpr:
				if x, ok := t.X.(*ast.Ident); ok {
					return [2]string{imports[x.Name], t.Sel.Name}, imports[x.Name] != ""
				}
			}
			return [2]string{}, false
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				p.names[d.Name.Name] = true
				continue
			}
			if len(d.Recv.List) > 0 {
				if r, ok := typeRef(d.Recv.List[0].Type); ok && r[0] == "" {
					p.member(r[1], d.Name.Name)
				}
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						p.names[n.Name] = true
					}
				case *ast.TypeSpec:
					typ := s.Name.Name
					p.names[typ] = true
					if s.Assign.IsValid() {
						if r, ok := typeRef(s.Type); ok {
							p.embeds[typ] = append(p.embeds[typ], r)
						}
						continue
					}
					var fields *ast.FieldList
					switch t := s.Type.(type) {
					case *ast.StructType:
						fields = t.Fields
					case *ast.InterfaceType:
						fields = t.Methods
					}
					if fields == nil {
						continue
					}
					for _, fl := range fields.List {
						for _, n := range fl.Names {
							p.member(typ, n.Name)
						}
						if len(fl.Names) == 0 {
							if r, ok := typeRef(fl.Type); ok {
								p.member(typ, r[1])
								p.embeds[typ] = append(p.embeds[typ], r)
							}
						}
					}
				}
			}
		}
	}
}
