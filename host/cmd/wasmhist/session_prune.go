package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
)

func runSessionPrune(ctx context.Context, e *env, args []string) error {
	const cmd = "session prune"
	fs := flagSet(e, cmd, helpText{
		usage: "--older-than DURATION [--store STORE] [flags]",
		summary: "Deletes every session last committed more than DURATION ago, as 'session delete' does,\n" +
			"and prints what it removed; without --store, the session files of the current directory.",
		examples: []string{"wasmhist session prune --older-than 30d --store sessions.db"},
		details: "  DURATION is Go's (90m, 720h) or days (30d), by the store's clock. Each slot's rows are\n" +
			"  cleared through its plugin and the session's journal rows deleted, in one transaction\n" +
			"  per database, then the session is removed from the store. A session chatted on\n" +
			"  meanwhile is kept.",
	})
	olderThan := fs.String("older-than", "", "delete sessions last committed longer than `DURATION` ago (720h, 30d)")
	st := storeFlags(fs)
	ps := pluginFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(cmd, "takes no arguments, got %d: use 'wasmhist %s --older-than 30d --store STORE'", len(pos), cmd)
	}
	age, err := parseAge(*olderThan)
	if err != nil {
		return usagef(cmd, "--older-than %q: %v: give a positive duration such as 720h or 30d", *olderThan, err)
	}
	if !st.set() {
		if err := st.Set("." + string(filepath.Separator)); err != nil {
			return usagef(cmd, "%v", err)
		}
	}
	opened, err := st.open(ctx, e, cmd)
	if err != nil {
		return err
	}
	defer opened.close()
	h, err := newHost(ctx, e, cmd, ps)
	if err != nil {
		return err
	}
	defer h.Close(context.WithoutCancel(ctx))
	sp := &storePlugins{e: e, cmd: cmd, host: h, ps: ps, loaded: map[[2]string]*host.Plugin{}}
	cutoff := time.Now().Add(-age)
	erased, err := conversation.Prune(ctx, opened, cutoff, sp.recorded(st))
	for _, x := range erased {
		fmt.Fprintln(e.stdout, describeErased(x))
	}
	summary := fmt.Sprintf("%d sessions of %s last committed before %s", len(erased), st.describe(), cutoff.UTC().Format(time.RFC3339))
	if err != nil {
		if interrupted(ctx, err) {
			return failf(cmd, "%w after deleting %s", errInterrupted, summary)
		}
		return failf(cmd, "deleted %s, then stopped: %w", summary, err)
	}
	fmt.Fprintln(e.stdout, "pruned "+summary)
	return nil
}

// describeErased says what Erase removed, in one line.
func describeErased(x *conversation.Erased) string {
	line := fmt.Sprintf("deleted session %s (revision %d)", x.SessionID, x.Revision)
	var slots []string
	for _, s := range x.Slots {
		where := "in the session"
		if s.Storage != "" {
			where = "rows in " + s.Storage
		}
		slots = append(slots, fmt.Sprintf("%s (%s, %s)", s.Key, s.Plugin, where))
	}
	if len(slots) > 0 {
		line += "; cleared: " + strings.Join(slots, ", ")
	}
	if len(x.Journals) > 0 {
		line += "; journal rows removed in: " + strings.Join(x.Journals, ", ")
	}
	return line
}

// parseAge is time.ParseDuration that also takes whole days ("30d").
func parseAge(v string) (time.Duration, error) {
	if v == "" {
		return 0, fmt.Errorf("missing")
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("not a number of days")
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("not a duration")
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("not positive")
	}
	return d, nil
}
