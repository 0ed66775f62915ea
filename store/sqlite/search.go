package sqlite

import (
	"database/sql/driver"
	"fmt"

	"modernc.org/sqlite"

	"github.com/vigilhq/vigil/search"
)

// vigil_meta(metadata, filter) is 1 when the trace metadata (JSON text)
// satisfies the meta: filter in canonical form (search.Meta.String), else
// 0: the metadata comparison of search queries, which the SQL of
// store/internal/sqlstore/search.go calls on SQLite. PostgreSQL computes
// the same in SQL.
func init() {
	sqlite.MustRegisterDeterministicScalarFunction("vigil_meta", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		spec, ok := args[1].(string)
		if !ok {
			return nil, fmt.Errorf("vigil_meta: filter is %T, want text", args[1])
		}
		m, err := search.ParseMeta(spec)
		if err != nil {
			return nil, fmt.Errorf("vigil_meta: %w", err)
		}
		var md []byte
		switch v := args[0].(type) {
		case string:
			md = []byte(v)
		case []byte:
			md = v
		default:
			return int64(0), nil
		}
		if m.Match(md) {
			return int64(1), nil
		}
		return int64(0), nil
	})
}
