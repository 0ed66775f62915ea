package postgres

import "github.com/vigilhq/vigil/store/internal/sqlstore"

// migrations is the append-only schema history of the PostgreSQL store.
// Every step lives in the list shared with store/sqlite
// (store/internal/sqlstore/migrations.go), so both backends number their
// steps alike; a step that differs between the databases uses a marker
// there rather than a list of its own here.
func migrations() []string {
	return sqlstore.Migrations("postgres")
}
