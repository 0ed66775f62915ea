package sqlite

import (
	"database/sql/driver"
	"fmt"
	"sync"

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
		var md string
		switch v := args[0].(type) {
		case string:
			md = v
		case []byte:
			md = string(v)
		default:
			return int64(0), nil
		}
		root, ok := lastMetadata.get(md)
		if !ok {
			return int64(0), nil
		}
		if m.MatchValue(root) {
			return int64(1), nil
		}
		return int64(0), nil
	})
}

// lastMetadata keeps the last metadata decoded: a query with several
// meta: filters calls vigil_meta on the same row once per filter.
var lastMetadata metadataCache

type metadataCache struct {
	mu   sync.Mutex
	text string
	root any
	ok   bool
}

// get returns text decoded (search.DecodeMetadata), and false when it is
// not JSON.
func (c *metadataCache) get(text string) (any, bool) {
	c.mu.Lock()
	if c.text == text && c.root != nil {
		root, ok := c.root, c.ok
		c.mu.Unlock()
		return root, ok
	}
	c.mu.Unlock()
	root, err := search.DecodeMetadata([]byte(text))
	c.mu.Lock()
	c.text, c.root, c.ok = text, root, err == nil
	if err != nil {
		c.root = struct{}{} // remembered as not JSON
	}
	c.mu.Unlock()
	return root, err == nil
}
