package sqlstore

import (
	"database/sql"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestTraceBatchQueryUsesIndex: DeleteDataset's batch query walks the
// (dataset_id, idx) index instead of sorting the dataset's remaining traces
// for every batch (ORDER BY id did: deleting 200,000 traces on SQLite took
// 133 s, quadratic in the dataset's size).
func TestTraceBatchQueryUsesIndex(t *testing.T) {
	db, err := sql.Open("sqlite", "file::memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for i, m := range Migrations("sqlite") {
		if _, err := db.Exec(m); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	rows, err := db.Query("EXPLAIN QUERY PLAN "+strings.ReplaceAll(traceBatchQuery(""), "$1", "?"), "ds")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(plan, "; ")
	if strings.Contains(all, "TEMP B-TREE") || !strings.Contains(all, "traces_dataset_idx") {
		t.Errorf("batch query plan %q: want a walk of traces_dataset_idx with no sort", all)
	}
}
