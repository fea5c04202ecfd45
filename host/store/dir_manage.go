package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/host/session"
)

var _ Manager = (*Dir)(nil)

// List implements Manager. Updated is the file's modification
// time, which a save sets when it renames the new file into place.
func (f *Dir) List(ctx context.Context) ([]Info, error) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, fmt.Errorf("agent: file store: list: %w", err)
	}
	var infos []Info
	for _, e := range entries {
		name := e.Name()
		// Temporary files of a save in progress start with a dot.
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		sf, err := f.file(strings.TrimSuffix(name, ".json"))
		if err != nil {
			continue // not a name Save would have written
		}
		s, err := sf.Load(ctx)
		if errors.Is(err, session.ErrNotFound) {
			continue // deleted since ReadDir
		}
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(sf.Path())
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("agent: file store: list: %w", err)
		}
		infos = append(infos, Info{SessionID: s.SessionID, Revision: s.Revision, Updated: fi.ModTime()})
	}
	slices.SortFunc(infos, func(a, b Info) int { return strings.Compare(a.SessionID, b.SessionID) })
	return infos, nil
}

// Delete implements Manager: see File.Delete, whose directory lock every
// save takes too.
func (f *Dir) Delete(ctx context.Context, id string, revision int64) error {
	sf, err := f.file(id)
	if err != nil {
		return err
	}
	return sf.Delete(ctx, id, revision)
}
