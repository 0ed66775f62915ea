package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
)

// vigil keys: API keys with direct store access (no server, no key), for
// recovery when the admin key is lost. The store is found as vigil serve
// finds it (--config, --data-dir, --db and their environment variables).

func init() {
	register(command{name: "keys", summary: "create, list and revoke API keys directly in the store (recovery)", run: runKeys})
}

const keysUsage = `Usage: vigil keys <subcommand> [flags]

Manage API keys directly in the store, without a running server or a key:
the way back in when the admin key is lost. The store is the one vigil serve
uses with the same --config, --data-dir and --db flags (and VIGIL_DATA_DIR,
VIGIL_DB); a server may keep running meanwhile.

Subcommands:
  create [--user NAME] [--scope SCOPE] [--name NAME]   print a new key (default: an admin key of the admin user)
  list [--user NAME]                                   list keys (default: every user's)
  revoke ID                                            revoke a key (a running server stops accepting it within 60 s)

Run 'vigil keys <subcommand> -h' for its flags.
`

func runKeys(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, keysUsage)
		return exitCode(2, "")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, keysUsage)
		return nil
	case "create":
		return runKeysCreate(ctx, args[1:], stdout, stderr)
	case "list":
		return runKeysList(ctx, args[1:], stdout, stderr)
	case "revoke":
		return runKeysRevoke(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, keysUsage)
	return exitCode(2, fmt.Sprintf("keys: unknown subcommand %q", args[0]))
}

// keysStore is the store a keys subcommand works on.
type keysStore struct {
	store.Store
	adminName string // the admin username as serve resolves it ("" = "admin")
}

// openKeysStore parses args with the store flags plus those define adds,
// and opens the store. It returns the positional arguments.
func openKeysStore(ctx context.Context, name, usageLine, description string, args []string, stderr io.Writer, define func(fs *flag.FlagSet)) (*keysStore, []string, error) {
	fc, err := loadConfig(configFlag(args))
	if err != nil {
		return nil, nil, fmt.Errorf("keys %s: %w", name, err)
	}
	fs := newFlagSet("keys "+name, usageLine, description, stderr)
	where := addStoreFlags(fs, fc)
	where.existing = true
	if define != nil {
		define(fs)
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, nil, err
	}
	st, err := where.open(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("keys %s: %w", name, err)
	}
	return &keysStore{Store: st, adminName: envOr("VIGIL_AUTH_ADMIN_USERNAME", fc.Auth.AdminUsername)}, pos, nil
}

func runKeysCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var user, scope, name *string
	st, pos, err := openKeysStore(ctx, "create", "keys create [--user NAME] [--scope admin|full|ingest|read] [--name NAME] [--data-dir DIR | --db postgres://...]",
		"Create an API key directly in the store and print it on stdout (shown once: store it now).\nWithout --user the key belongs to the admin user; on a store with no users yet the\nadmin user is created first, as vigil serve would. The store must exist (a mistyped\n--data-dir is an error, not a new store).", args, stderr,
		func(fs *flag.FlagSet) {
			user = fs.String("user", "", "the key's owner (default: the admin user, $VIGIL_AUTH_ADMIN_USERNAME or the first admin)")
			scope = fs.String("scope", store.ScopeAdmin, "scope: admin, full, ingest or read")
			name = fs.String("name", "recovery", "the key's name")
		})
	if err != nil {
		return err
	}
	defer st.Close()
	if len(pos) != 0 {
		return fmt.Errorf("keys create: unexpected argument %q", pos[0])
	}
	owner, err := keysOwner(ctx, st, *user)
	if err != nil {
		return fmt.Errorf("keys create: %w", err)
	}
	plain, k, err := server.IssueAPIKey(ctx, st.Store, owner, *name, *scope)
	if err != nil {
		return fmt.Errorf("keys create: %w", err)
	}
	fmt.Fprintf(stderr, "vigil: created %s key %s for user %s (shown once, store it now):\n", k.Scope, k.ID, owner.Username)
	fmt.Fprintln(stdout, plain)
	return nil
}

// keysOwner returns the user called name, or for "" the admin user:
// the configured admin username (VIGIL_AUTH_ADMIN_USERNAME or
// auth.admin_username) when it is an admin, else the first enabled admin.
// On a store without users it creates the admin user as serve does.
func keysOwner(ctx context.Context, st *keysStore, name string) (*store.User, error) {
	if name != "" {
		u, err := st.GetUserByName(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("no user %q in the store ('vigil keys list' shows the users that have keys)", name)
		}
		if err != nil {
			return nil, fmt.Errorf("user %q: %w", name, err)
		}
		return u, nil
	}
	n, err := st.CountUsers(ctx)
	if err != nil {
		return nil, fmt.Errorf("count users: %w", err)
	}
	if n == 0 {
		u := &store.User{Username: cmp.Or(st.adminName, "admin"), Role: store.RoleAdmin}
		if err := st.CreateUser(ctx, u); err != nil {
			return nil, fmt.Errorf("create admin user: %w", err)
		}
		return u, nil
	}
	if st.adminName != "" {
		if u, err := st.GetUserByName(ctx, st.adminName); err == nil && u.Role == store.RoleAdmin {
			return u, nil
		}
	}
	users, err := st.ListUsers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	for _, u := range users {
		if u.Role == store.RoleAdmin && !u.Disabled {
			return u, nil
		}
	}
	return nil, errors.New("the store has no enabled admin user: name the key's owner with --user")
}

func runKeysList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var user *string
	st, pos, err := openKeysStore(ctx, "list", "keys list [--user NAME] [--data-dir DIR | --db postgres://...]",
		"List API keys from the store: id, owner, name, scope, the key's first and last\ncharacters, and its state (active, revoked, expired). Keys are never shown whole.", args, stderr,
		func(fs *flag.FlagSet) {
			user = fs.String("user", "", "only this user's keys (default: every user's)")
		})
	if err != nil {
		return err
	}
	defer st.Close()
	if len(pos) != 0 {
		return fmt.Errorf("keys list: unexpected argument %q", pos[0])
	}
	var users []*store.User
	if *user != "" {
		u, err := keysOwner(ctx, st, *user)
		if err != nil {
			return fmt.Errorf("keys list: %w", err)
		}
		users = []*store.User{u}
	} else if users, err = st.ListUsers(ctx); err != nil {
		return fmt.Errorf("keys list: %w", err)
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUSER\tNAME\tSCOPE\tKEY\tCREATED\tLAST USED\tSTATE")
	for _, u := range users {
		keys, err := st.ListAPIKeys(ctx, u.ID)
		if err != nil {
			return fmt.Errorf("keys list: user %s: %w", u.Username, err)
		}
		for _, k := range keys {
			used := "never"
			if k.LastUsedAt != nil {
				used = k.LastUsedAt.UTC().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s…%s\t%s\t%s\t%s\n", k.ID, u.Username, safe(k.Name), k.Scope, k.Prefix, k.Last4,
				k.TimeCreated.UTC().Format(time.DateTime), used, keyState(k, now))
		}
	}
	return tw.Flush()
}

// keyState is "revoked", "expired" or "active".
func keyState(k *store.APIKey, now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return "expired"
	}
	return "active"
}

func runKeysRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	st, pos, err := openKeysStore(ctx, "revoke", "keys revoke ID [--data-dir DIR | --db postgres://...]",
		"Revoke the API key with id ID (from 'vigil keys list'). A running server stops\naccepting it within 60 s (its key cache); a revoked key is never re-activated.", args, stderr, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	if len(pos) != 1 {
		return errors.New("keys revoke: want exactly one key ID ('vigil keys list' shows them)")
	}
	k, err := st.GetAPIKey(ctx, pos[0])
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("keys revoke: no API key with id %q ('vigil keys list' shows them)", pos[0])
	}
	if err != nil {
		return fmt.Errorf("keys revoke: %w", err)
	}
	if k.RevokedAt != nil {
		fmt.Fprintf(stdout, "key %s was already revoked\n", k.ID)
		return nil
	}
	if err := st.RevokeAPIKey(ctx, k.ID, time.Now()); err != nil {
		return fmt.Errorf("keys revoke %s: %w", k.ID, err)
	}
	fmt.Fprintf(stdout, "revoked key %s (%s…%s)\n", k.ID, k.Prefix, k.Last4)
	return nil
}
