package main

import "context"

func runSessionExport(ctx context.Context, e *env, args []string) error {
	const cmd = "session export"
	fs := flagSet(e, cmd, "FILE",
		"Prints the session in FILE on standard output exactly as stored (compact JSON, each plugin's\n"+
			"state bytes untouched), after checking it against schemas/session.json.\n"+
			"'wasmhist session import NEW.json' writes it back: export FILE | import NEW.json copies a session.\n"+
			"With --store, the argument is a session id in the store.")
	store := storeFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	a, err := sessionArgument(cmd, store, pos)
	if err != nil {
		return err
	}
	defer a.close()
	_, b, _, err := a.read(ctx, e)
	if err != nil {
		return err
	}
	path := a.where("")
	if _, err := e.stdout.Write(b); err != nil {
		return failf(cmd, "writing %s to standard output: %w", path, err)
	}
	return nil
}
