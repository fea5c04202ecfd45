// Package modpin reads the version of a dependency from the module's
// go.mod, for tests that pin a library internal the host relies on: their
// failure names the dependency and the version that changed it.
package modpin

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Version returns the version go.mod requires of module path, looking for
// go.mod from dir upwards.
func Version(dir, path string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("modpin: %w", err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
				if len(fields) >= 2 && fields[0] == path {
					return fields[1], nil
				}
			}
			return "", fmt.Errorf("modpin: %s is not required by %s", path, f.Name())
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("modpin: no go.mod above %s", dir)
		}
		dir = parent
	}
}
