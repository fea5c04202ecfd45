package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
)

// sqlSample is the sample plugin `new plugin --sql` copies from the clone:
// a database plugin whose SQL runs on SQLite and PostgreSQL alike.
const sqlSample = "plugins/sqlite"

// sqlPluginFiles renders a database plugin: the sqlite sample's main.go and
// provider package under the new plugin's name and module, a conformance
// test that loads its build with a database, and the go.mod and Makefile
// every new plugin gets. As with the quickstart, the sources are read from
// the clone, so there is no second copy to keep equal.
func sqlPluginFiles(p newPlugin) ([]newFile, error) {
	common, err := pluginFiles(p)
	if err != nil {
		return nil, err
	}
	var files []newFile
	for _, f := range common {
		switch f.name {
		case "go.mod":
			files = append(files, f)
		case "Makefile":
			// The build depends on the provider package's files too.
			f.data = bytes.Replace(f.data, []byte("$(wildcard *.go)"), []byte("$(wildcard *.go provider/*.go)"), 1)
			files = append(files, f)
		}
	}
	sample := filepath.Join(p.Wasmhist, filepath.FromSlash(sqlSample))
	entries, err := os.ReadDir(filepath.Join(sample, "provider"))
	if err != nil {
		return nil, fmt.Errorf("reading the sample database plugin from the wasmhist clone: %w", err)
	}
	names := []string{"main.go"}
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			names = append(names, "provider/"+n)
		}
	}
	rename := strings.NewReplacer(
		strconv.Quote(wasmhistModule+"/"+sqlSample+"/provider"), strconv.Quote(p.Module+"/provider"),
		"// Command sqlite ", "// Command "+p.Name+" ",
		"-o sqlite.wasm ./"+sqlSample, "-o "+p.Name+".wasm .",
		`const Name = "sqlite"`, "const Name = "+strconv.Quote(p.Name),
	)
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(sample, filepath.FromSlash(name)))
		if err != nil {
			return nil, fmt.Errorf("reading the sample database plugin's %s from the wasmhist clone: %w", name, err)
		}
		data, err := format.Source([]byte(rename.Replace(string(b))))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		files = append(files, newFile{name, data})
	}
	var b bytes.Buffer
	if err := template.Must(template.New("conformance_test.go").Parse(newSQLConformance)).Execute(&b, p); err != nil {
		return nil, err
	}
	data, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("conformance_test.go: %w", err)
	}
	return append(files, newFile{"conformance_test.go", data}), nil
}

const newSQLConformance = `//go:build !wasip1

package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// TestConformance builds the plugin and runs the conformance suite against
// the build through the host, granted an SQLite database. For PostgreSQL,
// grant pggrant.New(pggrant.Config{Name: "main", AdminDSN: ..., Schema:
// "history"}) instead: the provider chooses its DDL by the dialect.
func TestConformance(t *testing.T) {
	h, err := host.New(t.Context(), host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	wasm := sdktest.BuildPlugin(t, {{printf "%q" .Module}})
	db := filepath.Join(t.TempDir(), "history.db")
	sdktest.Run(t, func(ctx context.Context) (sdktest.Subject, error) {
		return h.Load(ctx, host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
	})
}
`
