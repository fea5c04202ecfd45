package main

import (
	"context"
	"fmt"

	"github.com/wasmhist/wasmhist/host/pggrant"
)

// runPostgres is the operator's work on a PostgreSQL database the
// commands keep sessions or plugin data in: for now, rotating the host
// key (pggrant.RotateKey).
func runPostgres(ctx context.Context, e *env, args []string) error {
	const cmd = "postgres"
	fs := flagSet(e, cmd, helpText{
		usage: "rotate-key [--db postgres|env:VAR]",
		summary: "Replaces the host key of the PostgreSQL database in $" + postgresDSNEnv + " (or, with\n" +
			"--db env:VAR, in $VAR), connecting as its admin, while hosts keep running.",
		details: "  The host key, which only the admin reads, derives every plugin role's password and\n" +
			"  tenant schema name and opens the host's functions. Rotate it when it may be known\n" +
			"  elsewhere: every plugin role gets a new password, every tenant schema and role its new\n" +
			"  name with its data, and the plugin roles' connections end. The plugin roles may not\n" +
			"  log in while it runs (a second or so), so hosts' calls fail meanwhile; a running host\n" +
			"  also fails its call in flight and its first call with the old key, committing nothing\n" +
			"  of them, and then uses the new key. Upgrade every host first: older versions refuse\n" +
			"  the database after a rotation.",
		examples: []string{"wasmhist postgres rotate-key"},
	})
	db := fs.String("db", "postgres", "postgres, or env:VAR for the connection string in $VAR")
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef(cmd, "no action: use 'wasmhist postgres rotate-key'")
	case len(pos) > 1 || pos[0] != "rotate-key":
		name := pos[0]
		if looksLikeConnString(name) {
			name = "(a connection string)"
		}
		return usagef(cmd, "unknown action %q: use 'wasmhist postgres rotate-key'", name)
	}
	v, ok := pgDBEnv(*db)
	if !ok {
		return usagef(cmd, "--db %s is not PostgreSQL: pass --db postgres ($%s) or --db env:VAR", *db, postgresDSNEnv)
	}
	dsn := e.getenv(v)
	if dsn == "" {
		return usagef(cmd, "$%s is empty: set it to the admin's PostgreSQL connection string (postgres://USER@HOST/DB, the password in ~/.pgpass or $PGPASSWORD)", v)
	}
	if _, err := pgName(cmd, v, dsn); err != nil {
		return err
	}
	rot, err := pggrant.RotateKey(ctx, dsn, "")
	if err != nil {
		return failf(cmd, "PostgreSQL ($%s): %w", v, err)
	}
	fmt.Fprintf(e.stdout, "rotated the host key of PostgreSQL ($%s): %d plugin roles given new passwords, %d tenant schemas renamed, %d plugin connections ended\n",
		v, rot.Roles, rot.Tenants, rot.Ended)
	return nil
}
