package sqlstore

import (
	"strings"

	"github.com/vigilhq/vigil/internal/lazyregexp"
)

// Migrations returns the append-only migration list for kind ("sqlite" or
// "postgres"). Never edit or reorder an entry once released: add a new one.
// Each entry runs in its own transaction. The DDL is common to both
// databases except for what is rewritten here: {{WITHOUT_ROWID}} becomes
// SQLite's WITHOUT ROWID, {{BYTES}} is BLOB or BYTEA, {{SERIAL}} an
// auto-incrementing integer key, and on PostgreSQL every TEXT column is declared
// COLLATE "C", so keys compare as bytes (as SQLite's BINARY does: both
// backends sort alike) and index maintenance skips the locale's strcoll.
//
// A step whose DDL differs between the databases writes the common part
// first, then {{SQLITE}} and the SQLite part, then {{POSTGRES}} and the
// PostgreSQL part.
func Migrations(kind string) []string {
	out := make([]string, len(migrations))
	for i, m := range migrations {
		if common, rest, ok := strings.Cut(m, "{{SQLITE}}"); ok {
			sq, pg, _ := strings.Cut(rest, "{{POSTGRES}}")
			if kind == "sqlite" {
				m = common + sq
			} else {
				m = common + pg
			}
		}
		if kind == "sqlite" {
			m = strings.ReplaceAll(m, "{{WITHOUT_ROWID}}", "WITHOUT ROWID")
			m = strings.ReplaceAll(m, "{{BYTES}}", "BLOB")
			m = strings.ReplaceAll(m, "{{SERIAL}}", "INTEGER PRIMARY KEY AUTOINCREMENT")
		} else {
			m = strings.ReplaceAll(m, "{{WITHOUT_ROWID}}", "")
			m = strings.ReplaceAll(m, "{{BYTES}}", "BYTEA")
			m = strings.ReplaceAll(m, "{{SERIAL}}", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")
			m = textColumn.ReplaceAllString(m, `$1 TEXT COLLATE "C"`)
		}
		out[i] = m
	}
	return out
}

// textColumn matches a TEXT column declaration.
var textColumn = lazyregexp.New(`(?m)^(\t[a-z_0-9]+) TEXT\b`)

var migrations = []string{
	// 1: accounts, datasets, traces, messages, annotations, tool registry,
	// ledger sessions, receipts, agent keys.
	`
CREATE TABLE users (
	id TEXT PRIMARY KEY,
	username TEXT NOT NULL UNIQUE,
	role TEXT NOT NULL,
	email TEXT NOT NULL DEFAULT '',
	disabled BOOLEAN NOT NULL DEFAULT FALSE,
	time_created BIGINT NOT NULL
);

CREATE TABLE api_keys (
	id TEXT PRIMARY KEY,
	key_hash TEXT NOT NULL UNIQUE,
	prefix TEXT NOT NULL,
	last4 TEXT NOT NULL,
	name TEXT NOT NULL,
	scope TEXT NOT NULL,
	owner_id TEXT NOT NULL,
	time_created BIGINT NOT NULL,
	expires_at BIGINT,
	revoked_at BIGINT,
	last_used_at BIGINT
);
CREATE INDEX api_keys_owner ON api_keys (owner_id, time_created);

CREATE TABLE web_sessions (
	token_hash TEXT PRIMARY KEY,
	key_id TEXT NOT NULL,
	user_id TEXT NOT NULL,
	scope TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	last_used_at BIGINT NOT NULL
);
CREATE INDEX web_sessions_key ON web_sessions (key_id);
CREATE INDEX web_sessions_user ON web_sessions (user_id);

CREATE TABLE datasets (
	id TEXT PRIMARY KEY,
	owner_id TEXT NOT NULL,
	name TEXT NOT NULL,
	metadata TEXT NOT NULL,
	is_public BOOLEAN NOT NULL DEFAULT FALSE,
	time_created BIGINT NOT NULL,
	latest_trace_time BIGINT,
	next_index BIGINT NOT NULL DEFAULT 0,
	num_traces BIGINT NOT NULL DEFAULT 0,
	UNIQUE (owner_id, name)
);

CREATE TABLE traces (
	id TEXT PRIMARY KEY,
	dataset_id TEXT,
	idx BIGINT NOT NULL,
	owner_id TEXT NOT NULL,
	name TEXT,
	hierarchy_path TEXT NOT NULL,
	metadata TEXT NOT NULL,
	session_key TEXT,
	session_id TEXT NOT NULL,
	key_id TEXT,
	shared BOOLEAN NOT NULL DEFAULT FALSE,
	status TEXT NOT NULL,
	ended_at BIGINT,
	time_created BIGINT NOT NULL,
	time_last_pushed BIGINT NOT NULL,
	message_count BIGINT NOT NULL
);
CREATE UNIQUE INDEX traces_dataset_idx ON traces (dataset_id, idx) WHERE dataset_id IS NOT NULL;
CREATE INDEX traces_snippets ON traces (owner_id, time_created) WHERE dataset_id IS NULL;
CREATE INDEX traces_session_key ON traces (session_key) WHERE session_key IS NOT NULL;

CREATE TABLE messages (
	trace_id TEXT NOT NULL,
	idx BIGINT NOT NULL,
	message_id TEXT NOT NULL,
	node_ids TEXT NOT NULL,
	data TEXT NOT NULL,
	PRIMARY KEY (trace_id, idx)
) {{WITHOUT_ROWID}};
CREATE UNIQUE INDEX messages_message_id ON messages (trace_id, message_id);

CREATE TABLE annotations (
	id TEXT PRIMARY KEY,
	trace_id TEXT NOT NULL,
	owner_id TEXT NOT NULL,
	user_id TEXT NOT NULL,
	content TEXT NOT NULL,
	message_id TEXT,
	address TEXT NOT NULL,
	extra_metadata TEXT,
	source TEXT NOT NULL,
	status TEXT NOT NULL,
	resolved BOOLEAN NOT NULL,
	time_created BIGINT NOT NULL
);
CREATE INDEX annotations_trace ON annotations (trace_id, time_created, id);

CREATE TABLE dataset_tools (
	dataset_id TEXT NOT NULL,
	name TEXT NOT NULL,
	count BIGINT NOT NULL,
	argument_keys TEXT NOT NULL,
	last_seen BIGINT NOT NULL,
	PRIMARY KEY (dataset_id, name)
);

CREATE TABLE ledger_sessions (
	id TEXT PRIMARY KEY,
	run_id TEXT,
	owner_id TEXT NOT NULL,
	name TEXT NOT NULL,
	agent TEXT NOT NULL,
	signer TEXT NOT NULL,
	signer_public_key TEXT,
	created_at BIGINT NOT NULL,
	closed_at BIGINT,
	tampered_at BIGINT,
	tamper_reason TEXT,
	receipt_count BIGINT NOT NULL,
	root_hash TEXT,
	close_hash TEXT,
	close_signature TEXT,
	extra TEXT,
	tail_hash TEXT NOT NULL,
	tail_timestamp BIGINT NOT NULL
);
CREATE INDEX ledger_sessions_run ON ledger_sessions (run_id);
CREATE INDEX ledger_sessions_owner ON ledger_sessions (owner_id, created_at);

CREATE TABLE receipts (
	session_id TEXT NOT NULL,
	seq BIGINT NOT NULL,
	id TEXT NOT NULL,
	hash TEXT NOT NULL,
	timestamp BIGINT NOT NULL,
	text TEXT NOT NULL,
	PRIMARY KEY (session_id, seq)
) {{WITHOUT_ROWID}};
CREATE UNIQUE INDEX receipts_id ON receipts (session_id, id);

CREATE TABLE agent_keys (
	agent TEXT NOT NULL,
	public_key TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT
);
CREATE UNIQUE INDEX agent_keys_active ON agent_keys (agent) WHERE revoked_at IS NULL;
`,
	// 2: blobs, saved queries, idempotency keys.
	`
CREATE TABLE blobs (
	owner_id TEXT NOT NULL,
	sha256 TEXT NOT NULL,
	content_type TEXT NOT NULL,
	size BIGINT NOT NULL,
	data {{BYTES}} NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (owner_id, sha256)
);

CREATE TABLE saved_queries (
	id TEXT PRIMARY KEY,
	dataset_id TEXT NOT NULL,
	owner_id TEXT NOT NULL,
	name TEXT NOT NULL,
	query TEXT NOT NULL,
	time_created BIGINT NOT NULL
);
CREATE INDEX saved_queries_dataset ON saved_queries (dataset_id, time_created);

CREATE TABLE idempotency_keys (
	principal TEXT NOT NULL,
	key TEXT NOT NULL,
	request_hash TEXT NOT NULL,
	status INTEGER NOT NULL,
	content_type TEXT NOT NULL,
	body {{BYTES}},
	created_at BIGINT NOT NULL,
	PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
`,
	// 3: dataset guardrails, their versions, the ruleset version and the
	// change feed.
	`
ALTER TABLE datasets ADD COLUMN ruleset_version BIGINT NOT NULL DEFAULT 0;

CREATE TABLE guardrails (
	id TEXT PRIMARY KEY,
	dataset_id TEXT NOT NULL,
	owner_id TEXT NOT NULL,
	name TEXT NOT NULL,
	content TEXT NOT NULL,
	enabled BOOLEAN NOT NULL,
	action TEXT NOT NULL,
	severity TEXT NOT NULL,
	scope TEXT,
	extra_metadata TEXT NOT NULL,
	version INTEGER NOT NULL,
	updated_by TEXT NOT NULL,
	time_created BIGINT NOT NULL,
	time_updated BIGINT NOT NULL,
	deleted BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX guardrails_dataset ON guardrails (dataset_id, time_created);

CREATE TABLE guardrail_versions (
	guardrail_id TEXT NOT NULL,
	dataset_id TEXT NOT NULL,
	version INTEGER NOT NULL,
	ruleset_version BIGINT NOT NULL,
	name TEXT NOT NULL,
	content TEXT NOT NULL,
	enabled BOOLEAN NOT NULL,
	action TEXT NOT NULL,
	severity TEXT NOT NULL,
	scope TEXT,
	extra_metadata TEXT NOT NULL,
	change TEXT NOT NULL,
	comment TEXT NOT NULL,
	author_id TEXT NOT NULL,
	time_created BIGINT NOT NULL,
	PRIMARY KEY (guardrail_id, version)
);
CREATE INDEX guardrail_versions_dataset ON guardrail_versions (dataset_id, ruleset_version);

CREATE TABLE guardrail_changes (
	seq {{SERIAL}},
	dataset_id TEXT NOT NULL,
	owner_id TEXT NOT NULL,
	ruleset_version BIGINT NOT NULL,
	time BIGINT NOT NULL
);
CREATE INDEX guardrail_changes_time ON guardrail_changes (time);
`,
	// 4: ledger findings.
	`
CREATE TABLE findings (
	id TEXT PRIMARY KEY,
	run_id TEXT NOT NULL,
	owner_id TEXT NOT NULL,
	node_id TEXT,
	monitor_id TEXT NOT NULL,
	monitor TEXT NOT NULL,
	key TEXT NOT NULL,
	title TEXT NOT NULL,
	severity TEXT NOT NULL,
	score DOUBLE PRECISION NOT NULL,
	citations TEXT NOT NULL,
	status TEXT NOT NULL,
	context TEXT,
	history TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX findings_dedup ON findings (monitor_id, run_id, key);
CREATE INDEX findings_run ON findings (run_id, created_at);
CREATE INDEX findings_status ON findings (status, created_at);
`,
	// 5: MCP sessions and tool pins.
	`
CREATE TABLE mcp_sessions (
	id TEXT PRIMARY KEY,
	owner_id TEXT NOT NULL,
	trace_id TEXT NOT NULL,
	dataset TEXT NOT NULL,
	transport TEXT NOT NULL,
	client TEXT,
	server TEXT,
	server_name TEXT NOT NULL,
	protocol_version TEXT NOT NULL,
	upstream TEXT NOT NULL,
	system_user TEXT NOT NULL,
	started_at BIGINT NOT NULL,
	last_seen_at BIGINT NOT NULL,
	ended_at BIGINT,
	state TEXT
);
CREATE INDEX mcp_sessions_owner ON mcp_sessions (owner_id, last_seen_at);

CREATE TABLE mcp_pins (
	id TEXT PRIMARY KEY,
	owner_id TEXT NOT NULL,
	server TEXT NOT NULL,
	tool TEXT NOT NULL,
	hash TEXT NOT NULL,
	pinned TEXT NOT NULL,
	status TEXT NOT NULL,
	pending_hash TEXT,
	pending TEXT,
	pending_first_seen BIGINT,
	approved_by TEXT NOT NULL,
	time_approved BIGINT,
	time_created BIGINT NOT NULL,
	UNIQUE (owner_id, server, tool)
);
`,
	// 6: instance-wide values every process sharing the database agrees
	// on (the ledger key seed of a PostgreSQL deployment without a key
	// file).
	`
CREATE TABLE instance_values (
	name TEXT PRIMARY KEY,
	value TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
`,

	// 7: SDK session ids are per owner (issue 17: one namespace across
	// users leaked that another user's id existed and blocked the owner's
	// receipts). The client's id moves to sdk_id, unique per owner; id
	// stays the unique row key (a server-made id for new SDK sessions).
	// Existing SDK sessions keep id = sdk_id.
	`
ALTER TABLE ledger_sessions ADD COLUMN sdk_id TEXT;
UPDATE ledger_sessions SET sdk_id = id WHERE extra LIKE '%"sdk":true%';
CREATE UNIQUE INDEX ledger_sessions_sdk ON ledger_sessions (owner_id, sdk_id);
`,

	// 8: annotation content that a text column cannot hold (NUL, a lone
	// surrogate) is stored escaped, flagged by content_escaped (text.go),
	// so it round-trips exactly on both backends (issue 17).
	`
ALTER TABLE annotations ADD COLUMN content_escaped BOOLEAN NOT NULL DEFAULT FALSE;
`,

	// 9: search (explorer-api §7): the searchable text of every trace,
	// folded (search.Fold), one row per field (msg -1 is the trace name),
	// under a trigram index (PostgreSQL: pg_trgm, installed in schema public
	// when it exists, so dropping another schema never drops it); search_reindex lists the traces stored before
	// this step, which Open indexes.
	`
CREATE TABLE search_reindex (
	trace_id TEXT PRIMARY KEY
);
INSERT INTO search_reindex (trace_id) SELECT id FROM traces;
{{SQLITE}}
CREATE TABLE search_text (
	id INTEGER PRIMARY KEY,
	trace_id TEXT NOT NULL,
	msg BIGINT NOT NULL,
	tool BOOLEAN NOT NULL,
	text TEXT NOT NULL
);
CREATE INDEX search_text_trace ON search_text (trace_id, msg);
CREATE VIRTUAL TABLE search_fts USING fts5(text, content='search_text', content_rowid='id', tokenize='trigram case_sensitive 1', columnsize=0);
CREATE TRIGGER search_text_insert AFTER INSERT ON search_text BEGIN
	INSERT INTO search_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER search_text_delete AFTER DELETE ON search_text BEGIN
	INSERT INTO search_fts (search_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
{{POSTGRES}}
CREATE TABLE search_text (
	id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	trace_id TEXT NOT NULL,
	msg BIGINT NOT NULL,
	tool BOOLEAN NOT NULL,
	text TEXT NOT NULL
);
CREATE INDEX search_text_trace ON search_text (trace_id, msg);
DO $$
DECLARE
	ext_schema text;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
		IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'public') THEN
			CREATE EXTENSION pg_trgm SCHEMA public;
		ELSE
			CREATE EXTENSION pg_trgm;
		END IF;
	END IF;
	SELECT n.nspname INTO ext_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
	EXECUTE format('CREATE INDEX search_text_trgm ON search_text USING gin (text %I.gin_trgm_ops)', ext_schema);
END;
$$;
CREATE FUNCTION vigil_jsonb(t text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
	RETURN t::jsonb;
EXCEPTION WHEN others THEN
	RETURN NULL;
END;
$$;
`,

	// 10: the durable monitor queue (one job per trace write into a
	// dataset with an enabled guardrail, enqueued in the write's
	// transaction) and per-guardrail evaluation error counts.
	`
CREATE TABLE monitor_jobs (
	id {{SERIAL}},
	dataset_id TEXT NOT NULL,
	trace_id TEXT NOT NULL,
	from_idx BIGINT NOT NULL,
	to_idx BIGINT NOT NULL,
	ruleset_version BIGINT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT '',
	lease_until BIGINT NOT NULL DEFAULT 0,
	time_created BIGINT NOT NULL
);
CREATE INDEX monitor_jobs_due ON monitor_jobs (lease_until, id);

CREATE TABLE monitor_errors (
	guardrail_id TEXT PRIMARY KEY,
	count BIGINT NOT NULL,
	last_error TEXT NOT NULL,
	last_at BIGINT NOT NULL
);
`,
	// 11: the span ids OTLP ingest stored, per owner (store.OTLPSpans):
	// exporter retries are skipped by span id across restarts and
	// processes.
	`
CREATE TABLE otlp_spans (
	owner_id TEXT NOT NULL,
	span_id TEXT NOT NULL,
	time_created BIGINT NOT NULL,
	PRIMARY KEY (owner_id, span_id)
) {{WITHOUT_ROWID}};
CREATE INDEX otlp_spans_time ON otlp_spans (time_created);
`,
}
