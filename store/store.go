// Package store defines Vigil's storage interface, its record types and the
// sentinel errors callers branch on. Two implementations live in the
// subpackages store/sqlite (embedded default) and store/postgres (scale-out);
// both pass the one shared suite in store/storetest.
//
// Goals: one narrow interface the server codes against; every write that the
// API acknowledges is committed in one database transaction; trace indices
// per dataset are assigned atomically and never reused; events are stored as
// the exact normalised JSON bytes that were hashed into the ledger, and each
// event's receipts are written in the same transaction as the event while the
// session row is locked (spec/ledger.md §7.4), with receipts kept as exact
// JSON text (§7.6).
//
// Non-goals: the store does not decode, normalise or validate trace events
// (package trace does), does not compute or verify receipts or signatures
// (package ledger does, through SealFunc and CloseFunc), does not parse
// annotation addresses or search queries, and does not check permissions: every
// method trusts its caller (the server) to have authorised the request.
// Ownership filters exist so the caller can express visibility, not to
// enforce it. Full-text search indexes (FTS5, pg_trgm) are not here yet.
//
// Layout: store.go holds the interface (one sub-interface per resource:
// users, keys, datasets, traces, annotations, ledger, blobs, saved queries,
// idempotency, guardrails, findings, MCP) and the record types; ids.go the
// id helpers (UUIDv7, ULID, key hashing); merge.go the JSON merges both
// backends apply inside their transactions. The SQL both backends share,
// with the one migration list, is store/internal/sqlstore.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"
)

// Sentinel errors. Implementations wrap them with context naming the
// dataset, trace, session or key involved; match with errors.Is.
var (
	// ErrNotFound reports that the dataset, trace, annotation, user, key,
	// session or receipt does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict reports a uniqueness violation: a dataset name already
	// taken by the owner, a username taken, a duplicate key hash, trace id,
	// explicit trace index, message id within a trace or receipt id within a
	// session, or a RequireEmpty push into a non-empty dataset, or deleting a
	// user who still owns datasets.
	ErrConflict = errors.New("conflict")
	// ErrFinished reports an append to a trace whose run is finished or
	// whose session is closed, or closing a session twice
	// (RUN_FINISHED / SESSION_CLOSED in the API).
	ErrFinished = errors.New("run finished or session closed")
	// ErrSchemaTooNew reports, from a backend's Open, a database migrated
	// by a newer Vigil: the binary refuses to touch a schema it does not
	// know.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
	// ErrInvalidText reports a string the database cannot keep in a text
	// column: one holding a NUL character (U+0000) or bytes that are not
	// UTF-8 (a lone surrogate in WTF-8). PostgreSQL refuses them; JSON
	// documents (events, receipts, metadata) carry them escaped and are
	// not affected.
	ErrInvalidText = errors.New("text holds a NUL character or invalid UTF-8")
)

// IndexTakenError is the ErrConflict of a push that gives a trace an
// explicit index already used in its dataset (InPush false), or gives one
// index to two of its traces (InPush true). errors.Is(err, ErrConflict)
// holds for it.
type IndexTakenError struct {
	Dataset string // the dataset's name
	Index   int64
	InPush  bool
}

// Error says which index is taken in which dataset.
func (e *IndexTakenError) Error() string {
	if e.InPush {
		return fmt.Sprintf("trace index %d is given twice in the traces added to dataset %q", e.Index, e.Dataset)
	}
	return fmt.Sprintf("trace index %d is already used in dataset %q", e.Index, e.Dataset)
}

// Unwrap returns ErrConflict.
func (e *IndexTakenError) Unwrap() error { return ErrConflict }

// Store is the storage interface. All methods are safe for concurrent use.
// Times are stored with microsecond precision in UTC. A method that returns a
// record returns a fresh value the caller may modify.
type Store interface {
	// Kind is "sqlite" or "postgres".
	Kind() string
	// SchemaVersion is the number of migrations applied.
	SchemaVersion(ctx context.Context) (int, error)
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close waits for nothing: callers stop issuing requests first. It
	// releases connections and stops subscriptions.
	Close() error

	Users
	APIKeys
	WebSessions
	Datasets
	Traces
	Annotations
	Ledger
	Notifier
	Blobs
	Instance
	SavedQueries
	Searcher
	SearchIndex
	Idempotency
	Guardrails
	Findings
	MonitorQueue
	MCP
	OTLPSpans
	Facets
	EventRanges
}

// SearchIndex builds the search index off the write path. Writes list
// the traces whose index rows must be (re)built, durably, in their own
// transaction; Search indexes what is pending for the datasets it reads
// before it runs, so it always sees committed writes, and a background
// loop (the server's) calls IndexPending to keep that backlog small.
type SearchIndex interface {
	// IndexPending indexes up to max pending traces (max <= 0: one
	// batch) and returns how many it took; 0 when nothing is pending.
	// Several processes on one database may call it at once: each
	// pending trace is indexed by one of them.
	IndexPending(ctx context.Context, max int) (int, error)
}

// Users stores the accounts of explorer-api §1.4 and §12.2.
type Users interface {
	// CreateUser inserts u. An empty ID gets a new UUIDv7 and a zero
	// TimeCreated gets the current time; both are written back into u.
	// ErrConflict when the username is taken.
	CreateUser(ctx context.Context, u *User) error
	// GetUser returns the user with that id, or ErrNotFound.
	GetUser(ctx context.Context, id string) (*User, error)
	// GetUserByName returns the user with that username (exact match), or
	// ErrNotFound.
	GetUserByName(ctx context.Context, username string) (*User, error)
	// ListUsers returns every user ordered by TimeCreated, then id.
	ListUsers(ctx context.Context) ([]*User, error)
	// CountUsers returns the number of users (bootstrap checks for zero).
	CountUsers(ctx context.Context) (int, error)
	// UpdateUser applies the non-nil fields of up and returns the user.
	// ErrNotFound when absent.
	UpdateUser(ctx context.Context, id string, up UserUpdate) (*User, error)
	// DeleteUser deletes a user who owns no datasets, together with their
	// keys and browser sessions. ErrConflict when the user still owns a
	// dataset; ErrNotFound when absent.
	DeleteUser(ctx context.Context, id string) error
}

// APIKeys stores hashed API keys (explorer-api §1.3). The plaintext key never
// reaches the store: callers pass HashKey(key).
type APIKeys interface {
	// CreateAPIKey inserts k. An empty ID gets a new UUIDv7, a zero
	// TimeCreated the current time. ErrConflict when the hash is known
	// (including revoked keys: a revoked hash is never re-activated).
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// GetAPIKeyByHash returns the key whose Hash equals hash, revoked or
	// not, or ErrNotFound. The caller checks RevokedAt and ExpiresAt.
	GetAPIKeyByHash(ctx context.Context, hash string) (*APIKey, error)
	// GetAPIKey returns the key with that id, or ErrNotFound.
	GetAPIKey(ctx context.Context, id string) (*APIKey, error)
	// ListAPIKeys returns the owner's keys, revoked ones included, oldest
	// first. An empty ownerID lists every key.
	ListAPIKeys(ctx context.Context, ownerID string) ([]*APIKey, error)
	// RevokeAPIKey sets RevokedAt (keeping the row) and deletes the
	// browser sessions created from the key. Revoking a revoked key keeps
	// the first time and succeeds. ErrNotFound when absent.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error
	// TouchAPIKey sets LastUsedAt = at when it is older than at by at
	// least a minute (or unset), so hot keys cost at most one write a
	// minute. ErrNotFound when absent.
	TouchAPIKey(ctx context.Context, id string, at time.Time) error
}

// WebSessions stores browser sessions (explorer-api §12.3), by token hash.
type WebSessions interface {
	// CreateWebSession inserts s. ErrConflict on a duplicate TokenHash.
	CreateWebSession(ctx context.Context, s *WebSession) error
	// GetWebSession returns the session with that token hash or
	// ErrNotFound.
	GetWebSession(ctx context.Context, tokenHash string) (*WebSession, error)
	// TouchWebSession sets LastUsedAt. ErrNotFound when absent.
	TouchWebSession(ctx context.Context, tokenHash string, at time.Time) error
	// DeleteWebSession deletes the session; deleting an absent one
	// succeeds.
	DeleteWebSession(ctx context.Context, tokenHash string) error
	// ListWebSessions returns the user's sessions, most recently used
	// first (the web UI's settings page).
	ListWebSessions(ctx context.Context, userID string) ([]*WebSession, error)
}

// Datasets stores datasets (explorer-api §2.5, §4).
type Datasets interface {
	// CreateDataset inserts d (ID, TimeCreated and Metadata defaulted as
	// for users; Metadata defaults to {}). ErrConflict when the owner
	// already has a dataset of that name.
	CreateDataset(ctx context.Context, d *Dataset) error
	// GetDataset returns the dataset with NumTraces filled in, or
	// ErrNotFound.
	GetDataset(ctx context.Context, id string) (*Dataset, error)
	// GetDatasetByName returns the owner's dataset of that name (exact,
	// case-sensitive) with NumTraces, or ErrNotFound.
	GetDatasetByName(ctx context.Context, ownerID, name string) (*Dataset, error)
	// ListDatasets returns the datasets matching f, newest
	// LatestTraceTime first (datasets without traces use TimeCreated),
	// ties broken by id. NumTraces is filled in.
	ListDatasets(ctx context.Context, f DatasetFilter) ([]*Dataset, error)
	// UpdateDataset applies the non-nil fields of up. ErrConflict when a
	// rename collides; ErrNotFound when absent.
	UpdateDataset(ctx context.Context, id string, up DatasetUpdate) (*Dataset, error)
	// DeleteDataset deletes the dataset, its traces, their messages and
	// annotations, and its tool registry. Ledger sessions and receipts of
	// its traces are kept and open ones are closed with closeFn (which may
	// be nil: then they are left open). ErrNotFound when absent. The traces
	// are deleted in batches of short transactions, so writes interleave
	// with a large delete; a failure midway leaves some traces deleted, and
	// calling it again completes the delete.
	DeleteDataset(ctx context.Context, id string, closeFn CloseFunc) error
	// PutDatasetMetadata merges patch into the dataset's metadata in one
	// transaction (explorer-api §4.2) and returns the result.
	// replaceAll=false: keys whose value is null are ignored, the others
	// set. replaceAll=true: every key not in SystemMetadataKeys that is
	// missing from patch or null in it is deleted, the others set; system
	// keys in patch are ignored then. Validation of known keys is the
	// caller's. ErrNotFound when absent.
	PutDatasetMetadata(ctx context.Context, id string, patch map[string]json.RawMessage, replaceAll bool) (json.RawMessage, error)
	// ListTools returns the dataset's tool registry (explorer-api §4.3),
	// by name.
	ListTools(ctx context.Context, datasetID string) ([]*Tool, error)
}

// Traces stores traces and their events.
type Traces interface {
	// PushTraces writes a batch of new traces in one transaction
	// (explorer-api §3.1, §8.2): it resolves or creates the dataset
	// (race-free), assigns each trace without an explicit index the next
	// index of the dataset counter (distinct and contiguous within the
	// batch), creates each trace's ledger session, calls req.Seal once per
	// trace with that session's tail and inserts the receipts it returns,
	// inserts annotations, updates the tool registry and the dataset's
	// LatestTraceTime. Nothing is written unless everything is.
	// Outcomes: ErrConflict (explicit index or id taken, RequireEmpty on a
	// non-empty dataset, duplicate message id within a trace), ErrNotFound
	// (DatasetName absent and CreateIfMissing false), or the Seal error.
	PushTraces(ctx context.Context, req PushRequest) (*PushResult, error)
	// AppendEvents appends events to an existing trace (explorer-api §3.2)
	// in one transaction that holds the trace's session row lock: it calls
	// req.Seal with the session tail and inserts the receipts it returns
	// beside the events, anchors annotations, bumps TimeLastPushed and the
	// tool registry. Outcomes: ErrNotFound (no such trace), ErrFinished
	// (run finished or session closed), ErrConflict (a message id already
	// in the trace), or the Seal error.
	AppendEvents(ctx context.Context, req AppendRequest) (*AppendResult, error)
	// AppendMany appends to several traces in one transaction (one
	// commit for all), each as AppendEvents would, also applying each
	// request's Name, MetadataMerge and OTLPSpanIDs (a request may then
	// have no messages). A trace that is missing or finished does not fail the
	// others: its outcome's Err is ErrNotFound or ErrFinished and nothing
	// of it is written. Any other error writes nothing. A trace may appear
	// once (ErrConflict). The requests' Seal functions may be called
	// concurrently (each on its own request, so their chains are
	// independent).
	AppendMany(ctx context.Context, reqs []AppendRequest) ([]AppendOutcome, error)
	// GetTrace returns the trace, with its messages when withMessages, or
	// ErrNotFound.
	GetTrace(ctx context.Context, id string, withMessages bool) (*Trace, error)
	// MessageIDs returns the trace's message ids in index order, without
	// reading the events (for choosing fresh ids before an append).
	// ErrNotFound when the trace is absent.
	MessageIDs(ctx context.Context, traceID string) ([]string, error)
	// ListTraces returns the traces matching f in f.Order.
	ListTraces(ctx context.Context, f TraceFilter) ([]*Trace, error)
	// CountTraces returns how many traces match f (Limit, Offset and
	// AfterIndex ignored).
	CountTraces(ctx context.Context, f TraceFilter) (int, error)
	// IterTraces streams the dataset's traces in index order, with
	// messages and annotations, reading them in pages so memory stays
	// bounded whatever the dataset size (explorer-api §8.3). The sequence
	// is not one snapshot: traces pushed while it runs may or may not
	// appear. It yields a non-nil error at most once, as its last element.
	IterTraces(ctx context.Context, datasetID string, opt IterOptions) iter.Seq2[*Trace, error]
	// IterTraceEvents streams the dataset's traces in index order like
	// IterTraces, each with its events as one JSON array (the stored
	// event data in index order, what trace.Decode reads) instead of
	// Messages, and without annotations: one row per trace, the form
	// analysing a whole dataset (backtests) reads fastest. Of each Trace
	// only ID, DatasetID, Index, OwnerID, Metadata and MessageCount are
	// read. opt.OnlyAnnotated and opt.IDs filter as for IterTraces.
	IterTraceEvents(ctx context.Context, datasetID string, opt IterOptions) iter.Seq2[*TraceEvents, error]
	// UpdateTrace applies up to the trace and returns it without messages.
	// ErrNotFound when absent.
	UpdateTrace(ctx context.Context, id string, up TraceUpdate) (*Trace, error)
	// DeleteTrace deletes the trace, its messages and annotations. Its
	// ledger session and receipts are kept and, when still open, closed
	// with closeFn (nil leaves it open). ErrNotFound when absent.
	DeleteTrace(ctx context.Context, id string, closeFn CloseFunc) error
	// FinishRun sets the run status (RunCompleted or RunFailed) and
	// EndedAt, and closes the trace's session with closeFn, in one
	// transaction. ErrFinished when already finished; ErrNotFound when
	// absent.
	FinishRun(ctx context.Context, traceID string, status RunStatus, at time.Time, closeFn CloseFunc) (*Trace, error)
}

// Annotations stores annotations (explorer-api §2.2, §6).
type Annotations interface {
	// CreateAnnotation inserts a (ID and TimeCreated defaulted), anchoring
	// a.AnchorIndex to a message id as NewAnnotation describes. ErrNotFound
	// when the trace is absent.
	CreateAnnotation(ctx context.Context, a *Annotation) error
	// GetAnnotation returns the annotation or ErrNotFound.
	GetAnnotation(ctx context.Context, id string) (*Annotation, error)
	// ListAnnotations returns the trace's annotations ordered by
	// TimeCreated then id; sources, when non-empty, keeps only those
	// sources ("" or "user" match annotations without a source).
	ListAnnotations(ctx context.Context, traceID string, sources []string) ([]*Annotation, error)
	// UpdateAnnotation sets Content when non-nil and merges
	// MetadataMerge's top-level keys into ExtraMetadata (shallow).
	// ErrNotFound when absent.
	UpdateAnnotation(ctx context.Context, id string, up AnnotationUpdate) (*Annotation, error)
	// DeleteAnnotation deletes it, or returns ErrNotFound.
	DeleteAnnotation(ctx context.Context, id string) error
	// ReplaceAnnotations deletes the trace's annotations of source whose
	// extra_metadata.status is not "accepted" or "rejected" and inserts
	// anns (their Source is forced to source), in one transaction
	// (explorer-api §6). ErrNotFound when the trace is absent.
	ReplaceAnnotations(ctx context.Context, traceID, source string, anns []*Annotation) (deleted, inserted int, err error)
	// CountAnnotationsBySource returns, per trace id, the number of
	// annotations per source ("user" for those without one).
	CountAnnotationsBySource(ctx context.Context, traceIDs []string) (map[string]map[string]int, error)
}

// Ledger stores ledger sessions and receipts (spec/ledger.md §6, §7.6) and
// agent keys. Server-signed sessions are created by PushTraces; this
// interface serves the SDK-compatible endpoints and verification.
type Ledger interface {
	// CreateSession inserts s (CreatedAt defaulted; ID required).
	// ErrConflict when the id exists.
	CreateSession(ctx context.Context, s *Session) error
	// GetSession returns the session with its tail, or ErrNotFound.
	GetSession(ctx context.Context, id string) (*Session, error)
	// GetSDKSession returns the session of ownerID whose SDKID is sdkID,
	// or ErrNotFound (also when only another owner has one).
	GetSDKSession(ctx context.Context, ownerID, sdkID string) (*Session, error)
	// ListSessions returns sessions matching f, newest first.
	ListSessions(ctx context.Context, f SessionFilter) ([]*Session, error)
	// AppendReceipts appends receipts to a session without events: it
	// locks the session row, calls seal with the tail and inserts what it
	// returns. ErrFinished when the session is closed; ErrConflict when a
	// receipt id already exists in the session.
	AppendReceipts(ctx context.Context, sessionID string, seal SealFunc) ([]Receipt, error)
	// ListReceipts returns the session's receipts with Seq >= fromSeq in
	// seq order, at most limit (0 = all). ErrNotFound when the session is
	// absent.
	ListReceipts(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]Receipt, error)
	// GetReceipt returns the session's receipt with that id, or
	// ErrNotFound.
	GetReceipt(ctx context.Context, sessionID, receiptID string) (*Receipt, error)
	// CloseSession locks the session, calls closeFn with it and stores the
	// returned close statement. ErrFinished when already closed.
	CloseSession(ctx context.Context, sessionID string, closeFn CloseFunc) (*Session, error)
	// MarkSessionTampered sets TamperedAt and TamperReason unless already
	// set (tampered is sticky; the first reason wins) and returns the
	// session. ErrNotFound when absent.
	MarkSessionTampered(ctx context.Context, sessionID string, at time.Time, reason json.RawMessage) (*Session, error)

	// PutAgentKey registers an agent's public key, replacing an earlier
	// unrevoked one (which gets RevokedAt = k.CreatedAt).
	PutAgentKey(ctx context.Context, k *AgentKey) error
	// GetAgentKey returns the agent's unrevoked key or ErrNotFound.
	GetAgentKey(ctx context.Context, agent string) (*AgentKey, error)
	// ListAgentKeys returns every agent key, revoked ones included.
	ListAgentKeys(ctx context.Context) ([]*AgentKey, error)
	// RevokeAgentKey revokes the agent's key. ErrNotFound when none.
	RevokeAgentKey(ctx context.Context, agent string, at time.Time) error
}

// Notifier is a small publish/subscribe helper for cache invalidation across
// processes: LISTEN/NOTIFY on PostgreSQL, in-process fan-out on SQLite (which
// has one process by construction).
type Notifier interface {
	// Notify publishes payload (at most 7,000 bytes) on channel. Channel
	// names match ^[a-z_][a-z0-9_]{0,62}$.
	Notify(ctx context.Context, channel, payload string) error
	// Subscribe delivers every payload published on channel after it
	// returns, until ctx ends; then the returned channel is closed. A slow
	// reader loses payloads rather than blocking publishers (the buffer
	// holds 64), so use it for invalidation, not for data.
	Subscribe(ctx context.Context, channel string) (<-chan string, error)
}

// Blobs stores content-addressed images (explorer-api §2.1: SHA-256 per
// owner, at most 20 MiB each; the size limit is the caller's).
type Blobs interface {
	// PutBlob stores b unless the owner already has a blob with that
	// SHA256 (then the stored one is kept: same hash, same bytes).
	// CreatedAt is defaulted; Size is set from Data.
	PutBlob(ctx context.Context, b *Blob) error
	// GetBlob returns the owner's blob with that hash, or ErrNotFound.
	GetBlob(ctx context.Context, ownerID, sha256 string) (*Blob, error)
	// DeleteBlob deletes it, or returns ErrNotFound.
	DeleteBlob(ctx context.Context, ownerID, sha256 string) error
}

// Instance holds instance-wide values that every process sharing the
// database must agree on, such as the ledger signing key of a PostgreSQL
// deployment that has no key file (vigil serve).
type Instance interface {
	// InitInstanceValue stores value under name unless a value is stored
	// there already, and returns the stored value: the first writer wins,
	// so processes starting together agree.
	InitInstanceValue(ctx context.Context, name, value string) (string, error)
}

// SavedQueries stores a dataset's saved searches (explorer-api §2.5, §7.1);
// the built-in ones are the server's.
type SavedQueries interface {
	// CreateSavedQuery inserts q (ID and TimeCreated defaulted).
	// ErrNotFound when the dataset is absent.
	CreateSavedQuery(ctx context.Context, q *SavedQuery) error
	// GetSavedQuery returns it or ErrNotFound.
	GetSavedQuery(ctx context.Context, id string) (*SavedQuery, error)
	// ListSavedQueries returns the dataset's queries, oldest first.
	ListSavedQueries(ctx context.Context, datasetID string) ([]*SavedQuery, error)
	// DeleteSavedQuery deletes it or returns ErrNotFound. DeleteDataset
	// deletes a dataset's queries too.
	DeleteSavedQuery(ctx context.Context, id string) error
}

// Idempotency stores the responses replayed for repeated Idempotency-Key
// requests (explorer-api §1.6). The flow: ReserveIdempotencyKey before doing
// the work; if it returns an existing record, replay it (Status != 0),
// report a request in flight (Status == 0), or answer 409 when its
// RequestHash differs; otherwise do the work and CompleteIdempotencyKey, or
// ReleaseIdempotencyKey when it failed without side effects.
type Idempotency interface {
	// ReserveIdempotencyKey inserts rec as pending (Status 0) unless a
	// record with the same Principal and Key exists that was created at or
	// after expiredBefore; an older one is replaced. It returns the record
	// now stored and whether it is rec.
	ReserveIdempotencyKey(ctx context.Context, rec *IdempotencyRecord, expiredBefore time.Time) (*IdempotencyRecord, bool, error)
	// CompleteIdempotencyKey stores the response of a reserved key.
	// ErrNotFound when no such reservation exists.
	CompleteIdempotencyKey(ctx context.Context, principal, key string, status int, contentType string, body []byte) error
	// ReleaseIdempotencyKey deletes a pending reservation (a completed one
	// is kept); absent keys are fine.
	ReleaseIdempotencyKey(ctx context.Context, principal, key string) error
	// PurgeIdempotencyKeys deletes records created before before and
	// returns how many.
	PurgeIdempotencyKeys(ctx context.Context, before time.Time) (int, error)
}

// Guardrails stores dataset guardrails (policies) with their immutable
// version history and the global change feed (explorer-api §9). Every write
// adds one version row, raises the dataset's RulesetVersion by one and
// appends one change-feed entry, in one transaction; the caller publishes
// the change (Notify) after it returns.
type Guardrails interface {
	// CreateGuardrail inserts g as version 1 with change
	// GuardrailCreated or GuardrailImported (ID, times defaulted; Version
	// set). ErrNotFound when the dataset is absent.
	CreateGuardrail(ctx context.Context, g *Guardrail, change, comment string) error
	// GetGuardrail returns the current state, or ErrNotFound (also once
	// deleted).
	GetGuardrail(ctx context.Context, id string) (*Guardrail, error)
	// ListGuardrails returns the dataset's guardrails (disabled included,
	// deleted not), oldest first.
	ListGuardrails(ctx context.Context, datasetID string) ([]*Guardrail, error)
	// UpdateGuardrail applies up. ErrConflict when up.BaseVersion is set
	// and differs from the current version (version_conflict);
	// ErrNotFound when absent or deleted.
	UpdateGuardrail(ctx context.Context, id string, up GuardrailUpdate) (*Guardrail, error)
	// DeleteGuardrail marks it deleted (a version with change
	// GuardrailDeleted). ErrNotFound when absent or already deleted.
	DeleteGuardrail(ctx context.Context, id, authorID, comment string) error
	// RestoreGuardrail writes a new version equal to version n (change
	// GuardrailRestored), undeleting a deleted guardrail. ErrNotFound when
	// the guardrail or version is absent.
	RestoreGuardrail(ctx context.Context, id string, n int, authorID, comment string) (*Guardrail, error)
	// ListGuardrailVersions returns its versions, newest first (deleted
	// guardrails included). ErrNotFound when it never existed.
	ListGuardrailVersions(ctx context.Context, id string) ([]*GuardrailVersion, error)
	// GetGuardrailVersion returns version n, or ErrNotFound.
	GetGuardrailVersion(ctx context.Context, id string, n int) (*GuardrailVersion, error)
	// ListPolicyHistory returns every version row of the dataset, newest
	// first (by ruleset version, then guardrail id).
	ListPolicyHistory(ctx context.Context, datasetID string, limit, offset int) ([]*GuardrailVersion, error)
	// RulesetAt returns the dataset's guardrails as they were at ruleset
	// version rv (deleted ones left out), oldest first. ErrNotFound when
	// rv is above the dataset's current ruleset version.
	RulesetAt(ctx context.Context, datasetID string, rv int64) ([]*Guardrail, error)
	// ListGuardrailChanges returns the change-feed entries with Seq >
	// after, in Seq order, at most limit (0 = all). Seq order is commit
	// order (writers serialise on the feed).
	ListGuardrailChanges(ctx context.Context, after int64, limit int) (*GuardrailFeed, error)
	// PurgeGuardrailChanges deletes feed entries older than before, except
	// the newest entry (so Latest never goes back), and returns how many.
	// The feed keeps at least 7 days: before is the caller's choice.
	PurgeGuardrailChanges(ctx context.Context, before time.Time) (int, error)
}

// Findings stores ledger findings (spec/ledger.md §8.1, §8.2): stored
// violations, deduplicated on (MonitorID, RunID, Key), with review status
// and history.
type Findings interface {
	// UpsertFinding inserts f (ID a new ULID, Status "open", times
	// defaulted) or, when a finding with the same MonitorID, RunID and
	// Key exists, updates its Title, Severity, Score, NodeID, Citations,
	// Context and UpdatedAt, never its Status or History. It returns the
	// stored finding and whether it is new.
	UpsertFinding(ctx context.Context, f *Finding) (*Finding, bool, error)
	// GetFinding returns it or ErrNotFound.
	GetFinding(ctx context.Context, id string) (*Finding, error)
	// ListFindings returns the findings matching f: by CreatedAt then id,
	// or in review-queue order (critical first, then warn, then info, then
	// CreatedAt, then id) when f.ReviewOrder.
	ListFindings(ctx context.Context, f FindingFilter) ([]*Finding, error)
	// SetFindingStatus moves a finding open → accepted|dismissed or
	// accepted|dismissed → open, appending {at, by, from, to, note} to
	// its history. ErrConflict for any other transition (including to the
	// same status); ErrNotFound when absent.
	SetFindingStatus(ctx context.Context, id, to, by, note string, at time.Time) (*Finding, error)
	// ListEvalCases returns the eval cases of spec/ledger.md §8.3: one per
	// run whose metadata holds eval: {suite, case} with two non-empty
	// strings, of ownerID ("" = every owner) and of suite ("" = every
	// suite), oldest first (TimeCreated, then run id). Runs with any other
	// eval member are left out.
	ListEvalCases(ctx context.Context, ownerID, suite string) ([]EvalCase, error)
}

// EvalCase is a run that is an eval case (spec/ledger.md §8.3).
type EvalCase struct {
	Suite       string
	Case        string
	RunID       string
	OwnerID     string
	TimeCreated time.Time
}

// MonitorQueue is the durable queue of monitor evaluations (spec/ledger.md
// §8): PushTraces and AppendEvents enqueue one job per trace of a dataset
// that has an enabled guardrail, in the transaction that stores the events,
// so an acknowledged write is never left unevaluated. Workers claim jobs
// with a lease; a job whose lease runs out (its worker crashed) is claimed
// again, so delivery is at least once and consumers deduplicate (findings
// do, on (monitorId, runId, key)). It also keeps per-guardrail evaluation
// error counts.
type MonitorQueue interface {
	// ClaimMonitorJobs leases up to n jobs whose lease has run out (new
	// jobs have none), oldest first, until now+lease, and raises their
	// Attempts. Each returned job carries its lease as LeaseUntil, which
	// Complete and Retry check. It returns no jobs and no error when none
	// are due; it takes no write lock then.
	ClaimMonitorJobs(ctx context.Context, n int, lease time.Duration) ([]*MonitorJob, error)
	// CompleteMonitorJobs deletes, in one transaction, each job that
	// still holds its lease; a job whose lease passed to another worker is
	// left to that worker.
	CompleteMonitorJobs(ctx context.Context, jobs []*MonitorJob) error
	// RetryMonitorJob makes the job due again after delay, recording
	// errText, if j still holds its lease.
	RetryMonitorJob(ctx context.Context, j *MonitorJob, delay time.Duration, errText string) error
	// ReleaseMonitorJobs makes the jobs that still hold their leases due
	// again at once, in one transaction (a pool that stops puts back what
	// it has not finished).
	ReleaseMonitorJobs(ctx context.Context, jobs []*MonitorJob) error
	// ExtendMonitorJob moves j's lease to now+lease if j still holds it,
	// updating j.LeaseUntil; false when the lease passed to another
	// worker (or the job is gone).
	ExtendMonitorJob(ctx context.Context, j *MonitorJob, lease time.Duration) (bool, error)
	// MonitorTrace returns the trace's ID, DatasetID, OwnerID, Metadata
	// and MessageCount (other fields may be zero) with its first n events (all when it has fewer), taking the events from memory when
	// this process wrote them recently (the last 8 MiB of pushes into
	// datasets with an enabled guardrail, and appends to them), else from
	// the database. ErrNotFound when the trace is gone.
	MonitorTrace(ctx context.Context, traceID string, n int) (*Trace, error)
	// MonitorTraces is MonitorTrace for several traces in one round trip
	// to the database (for the events not in memory): out[i] is trace
	// ids[i] with its first ns[i] events, nil when the trace is gone.
	MonitorTraces(ctx context.Context, ids []string, ns []int) ([]*Trace, error)
	// CountMonitorJobs returns the number of queued jobs, leased or not.
	CountMonitorJobs(ctx context.Context) (int, error)
	// RecordMonitorError counts one failed evaluation of the guardrail
	// (a rule failure, blown budget, load or analysis error) with its
	// message and time.
	RecordMonitorError(ctx context.Context, guardrailID, msg string, at time.Time) error
	// MonitorErrors returns the error counts of the given guardrails; a
	// guardrail without errors is absent from the map.
	MonitorErrors(ctx context.Context, guardrailIDs []string) (map[string]*MonitorErrorStat, error)
}

// MonitorJobsChannel is the Notifier channel on which the store announces,
// after a write that queued monitor jobs commits, that jobs are due
// (PostgreSQL: from the writing transaction itself, to every process; SQLite:
// in process). Workers still poll: a notification may be lost.
const MonitorJobsChannel = "vigil_monitor_jobs"

// MonitorJob is one queued evaluation: the events [From, To) of a trace,
// which arrived in one write, to be checked against the history [0, From).
type MonitorJob struct {
	ID        int64
	DatasetID string
	TraceID   string
	From, To  int
	// RulesetVersion is the dataset's ruleset version when the events
	// were written: the guardrails (RulesetAt) the job evaluates.
	RulesetVersion int64
	Attempts       int       // claims so far, this one included
	LastError      string    // of the previous attempt, "" = none
	LeaseUntil     time.Time // the lease this claim holds
	TimeCreated    time.Time
}

// MonitorErrorStat counts a guardrail's failed evaluations.
type MonitorErrorStat struct {
	GuardrailID string
	Count       int64
	LastError   string
	LastAt      time.Time
}

// MCP stores MCP sessions and tool pins (explorer-api §13, gateway.md
// §9.4). The pinning decision table is the caller's; the store runs it
// atomically per (owner, server) through UpdateMCPPins.
type MCP interface {
	// PutMCPSession inserts or replaces the session with s.ID (StartedAt
	// is kept from the first put; LastSeenAt defaults to now).
	PutMCPSession(ctx context.Context, s *MCPSession) error
	// GetMCPSession returns it or ErrNotFound.
	GetMCPSession(ctx context.Context, id string) (*MCPSession, error)
	// ListMCPSessions returns sessions matching f, newest LastSeenAt first.
	ListMCPSessions(ctx context.Context, f MCPSessionFilter) ([]*MCPSession, error)
	// UpdateMCPPins locks the (owner, server) pin set, calls fn with its
	// current pins (by tool name) and writes the pins fn returns
	// (inserted when their ID is empty, else replaced), in one
	// transaction. fn must not call the store.
	UpdateMCPPins(ctx context.Context, ownerID, server string, fn func(pins []*MCPPin) ([]*MCPPin, error)) ([]*MCPPin, error)
	// ListMCPPins returns the owner's pins, of one server when server is
	// not "", by server then tool.
	ListMCPPins(ctx context.Context, ownerID, server string) ([]*MCPPin, error)
	// GetMCPPin returns it or ErrNotFound.
	GetMCPPin(ctx context.Context, id string) (*MCPPin, error)
	// ApproveMCPPin promotes the pending version to approved (Hash,
	// Pinned from Pending*; the pending fields cleared). ErrConflict when
	// nothing is pending; ErrNotFound when absent.
	ApproveMCPPin(ctx context.Context, id, by string, at time.Time) (*MCPPin, error)
	// DeleteMCPPin forgets the pin, or returns ErrNotFound.
	DeleteMCPPin(ctx context.Context, id string) error
}

// MCPSession is a recorded MCP session (explorer-api §13).
type MCPSession struct {
	ID              string
	OwnerID         string
	TraceID         string
	Dataset         string
	Transport       string
	Client          json.RawMessage // {name, version} or nil
	Server          json.RawMessage // {name, version} or nil
	ServerName      string          // the pinning identity, for filters
	ProtocolVersion string
	Upstream        string
	SystemUser      string
	StartedAt       time.Time
	LastSeenAt      time.Time
	EndedAt         *time.Time
	// State is the gateway's own JSON (pins seen, error keys reported)
	// kept for re-attaching after a restart; nil = none.
	State json.RawMessage
}

// MCPSessionFilter selects sessions. Zero fields do not filter.
type MCPSessionFilter struct {
	OwnerID string
	Dataset string
	Server  string // ServerName
	Limit   int    // 0 = no limit
	Offset  int
}

// MCP pin statuses.
const (
	PinApproved = "approved"
	PinPending  = "pending"
)

// MCPPin is a tool's pinned definition (gateway.md §9.4).
type MCPPin struct {
	ID      string
	OwnerID string
	Server  string
	Tool    string
	Hash    string          // fingerprint of the approved definition
	Pinned  json.RawMessage // {description, input_schema, title, annotations}
	Status  string          // PinApproved, or PinPending while a changed version waits
	// The pending version, when Status is PinPending.
	PendingHash      string
	Pending          json.RawMessage
	PendingFirstSeen *time.Time
	ApprovedBy       string
	TimeApproved     *time.Time
	TimeCreated      time.Time
}

// Finding statuses and severities (spec/ledger.md §8.1).
const (
	FindingOpen      = "open"
	FindingAccepted  = "accepted"
	FindingDismissed = "dismissed"

	SeverityInfo     = "info"
	SeverityWarn     = "warn"
	SeverityCritical = "critical"
)

// Finding is one stored violation.
type Finding struct {
	ID        string // a ULID
	RunID     string // the trace id
	OwnerID   string
	NodeID    string // "" = the whole run
	MonitorID string
	Monitor   string // the monitor's name
	Key       string
	Title     string
	Severity  string
	Score     float64
	Citations json.RawMessage // [{nodeId|null, address}]
	Status    string
	Context   json.RawMessage // an object or nil
	CreatedAt time.Time
	UpdatedAt time.Time
	History   []FindingTransition
}

// FindingTransition is one review-status change.
type FindingTransition struct {
	At   time.Time `json:"at"`
	By   string    `json:"by"`
	From string    `json:"from"`
	To   string    `json:"to"`
	Note string    `json:"note,omitempty"`
}

// FindingFilter selects findings. Zero fields do not filter.
type FindingFilter struct {
	OwnerID     string
	RunID       string
	RunIDs      []string
	MonitorID   string
	Status      []string
	Severity    []string
	ReviewOrder bool
	Limit       int // 0 = no limit
	Offset      int
}

// Guardrail change kinds (explorer-api §9.1).
const (
	GuardrailCreated  = "created"
	GuardrailUpdated  = "updated"
	GuardrailDeleted  = "deleted"
	GuardrailRestored = "restored"
	GuardrailImported = "imported"
)

// Guardrail is a dataset guardrail's current state (explorer-api §2.6).
type Guardrail struct {
	ID            string
	DatasetID     string
	OwnerID       string
	Name          string
	Content       string // the rule text
	Enabled       bool
	Action        string          // "block" or "log"
	Severity      string          // "info", "warn" or "critical"
	Scope         json.RawMessage // {"kinds", "mcp_servers", "mcp_clients"} or nil (null: every kind)
	ExtraMetadata json.RawMessage // a JSON object; nil = {}
	Version       int
	UpdatedBy     string // user id of the last change
	TimeCreated   time.Time
	TimeUpdated   time.Time
}

// GuardrailVersion is one immutable version row.
type GuardrailVersion struct {
	GuardrailID    string
	DatasetID      string
	Version        int
	RulesetVersion int64 // the dataset's ruleset version this change made
	Name           string
	Content        string
	Enabled        bool
	Action         string
	Severity       string
	Scope          json.RawMessage
	ExtraMetadata  json.RawMessage
	Change         string // GuardrailCreated, …
	Comment        string
	AuthorID       string
	TimeCreated    time.Time
}

// GuardrailUpdate holds the changes UpdateGuardrail applies; nil fields are
// kept. Scope set to a pointer to nil or "null" clears it.
type GuardrailUpdate struct {
	Name          *string
	Content       *string
	Enabled       *bool
	Action        *string
	Severity      *string
	Scope         *json.RawMessage
	ExtraMetadata json.RawMessage // replaces the object when non-nil
	BaseVersion   int             // > 0: optimistic concurrency check
	AuthorID      string
	Comment       string
}

// GuardrailFeed is a page of the change feed. A client whose after is
// below Oldest-1 missed purged entries and must reset (explorer-api §9.3).
type GuardrailFeed struct {
	Changes []GuardrailChange
	Latest  int64 // the newest Seq, 0 when nothing ever changed
	Oldest  int64 // the oldest retained Seq, 0 when empty
}

// GuardrailChange is one change-feed entry (explorer-api §9.3).
type GuardrailChange struct {
	Seq            int64
	DatasetID      string
	OwnerID        string
	RulesetVersion int64
	Time           time.Time
}

// Blob is a stored image.
type Blob struct {
	OwnerID     string
	SHA256      string // lowercase hex of Data's SHA-256
	ContentType string
	Size        int64
	Data        []byte
	CreatedAt   time.Time
}

// SavedQuery is a saved search of a dataset.
type SavedQuery struct {
	ID          string
	DatasetID   string
	OwnerID     string
	Name        string
	Query       string
	TimeCreated time.Time
}

// IdempotencyRecord is a reserved or completed Idempotency-Key.
type IdempotencyRecord struct {
	Principal   string // the key or user id the request authenticated as
	Key         string // the Idempotency-Key header (at most 128 characters)
	RequestHash string // hash of method, path and body, compared on replay
	Status      int    // 0 while pending, else the HTTP status to replay
	ContentType string
	Body        []byte
	CreatedAt   time.Time
}

// SystemMetadataKeys are the dataset metadata keys that replace_all never
// deletes (explorer-api §4.2).
var SystemMetadataKeys = []string{"created_on"}

// User is an account (explorer-api §1.4).
type User struct {
	ID          string
	Username    string
	Role        string // "admin" or "member"
	Email       string // "" = none
	Disabled    bool
	TimeCreated time.Time
}

// UserUpdate holds the fields UpdateUser changes; nil leaves a field as is.
type UserUpdate struct {
	Role     *string
	Email    *string
	Disabled *bool
}

// Role values.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// Scope values of API keys (explorer-api §1.3).
const (
	ScopeRead   = "read"
	ScopeIngest = "ingest"
	ScopeFull   = "full"
	ScopeAdmin  = "admin"
)

// APIKey is a stored API key. Hash is HashKey(plaintext).
type APIKey struct {
	ID          string
	Hash        string // lowercase hex SHA-256 of the key
	Prefix      string // first 8 characters, for display
	Last4       string // last 4 characters
	Name        string
	Scope       string // ScopeRead, ScopeIngest, ScopeFull or ScopeAdmin
	OwnerID     string
	TimeCreated time.Time
	ExpiresAt   *time.Time // nil = never
	RevokedAt   *time.Time // nil = active
	LastUsedAt  *time.Time // nil = never used
}

// WebSession is a browser session (explorer-api §12.3). TokenHash is
// HashKey(cookie value).
type WebSession struct {
	TokenHash  string
	KeyID      string
	UserID     string
	Scope      string
	CreatedAt  time.Time
	LastUsedAt time.Time
}

// Dataset is a named collection of traces (explorer-api §2.5).
type Dataset struct {
	ID       string
	OwnerID  string
	Name     string
	Metadata json.RawMessage // a JSON object; never holds "policies"
	IsPublic bool
	// TimeCreated is set on create; LatestTraceTime is the last push or
	// append into the dataset (nil before the first).
	TimeCreated     time.Time
	LatestTraceTime *time.Time
	// NextIndex is the index the next pushed trace gets.
	NextIndex int64
	// NumTraces is filled in by reads, ignored by writes.
	NumTraces int
	// RulesetVersion counts the dataset's guardrail changes
	// (explorer-api §9.1); maintained by the Guardrails methods.
	RulesetVersion int64
}

// DatasetFilter selects datasets. Zero fields do not filter.
type DatasetFilter struct {
	OwnerID string // only this owner's datasets
	// VisibleTo keeps datasets owned by this user id or public.
	VisibleTo string
	// PublicOnly keeps public datasets only.
	PublicOnly bool
	// NameContains is a case-insensitive substring of the name.
	NameContains string
	// MetadataKey, when set, keeps datasets whose top-level metadata
	// member MetadataKey is the JSON string MetadataValue (the benchmark
	// leaderboard).
	MetadataKey   string
	MetadataValue string
	Limit         int // 0 = no limit
	Offset        int
}

// DatasetUpdate holds the fields UpdateDataset changes.
type DatasetUpdate struct {
	IsPublic *bool
	Name     *string
}

// Tool is one entry of a dataset's tool registry (explorer-api §4.3).
type Tool struct {
	Name         string
	Count        int64
	ArgumentKeys []string // sorted, distinct
	LastSeen     time.Time
}

// ToolUse reports tool calls seen in ingested events: Count calls named
// Name with the union of ArgumentKeys.
type ToolUse struct {
	Name         string
	Count        int64
	ArgumentKeys []string
}

// RunStatus is a run's status (spec/ledger.md §7.1).
type RunStatus string

// Run statuses.
const (
	RunOpen      RunStatus = "open"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
)

// Trace is a stored trace; it is also the ledger's run (id = run id).
type Trace struct {
	ID            string
	DatasetID     string // "" for snippets
	Index         int64  // 0 for snippets
	OwnerID       string
	Name          string // "" = null
	HierarchyPath []string
	Metadata      json.RawMessage // a JSON object
	SessionKey    string          // "" = null
	SessionID     string          // its ledger session (= ID for server-signed runs)
	KeyID         string          // the API key that created it, "" = none
	Shared        bool
	Status        RunStatus
	EndedAt       *time.Time
	// TimeCreated is set at push, TimeLastPushed bumped by each append.
	TimeCreated    time.Time
	TimeLastPushed time.Time
	MessageCount   int
	// Messages is filled in when requested, in index order.
	Messages []Message
	// Annotations is filled in by IterTraces.
	Annotations []*Annotation
}

// TraceEvents is a trace (without Messages) with its events as one JSON
// array text (IterTraceEvents).
type TraceEvents struct {
	Trace  *Trace
	Events json.RawMessage
}

// Message is one stored event of a trace.
type Message struct {
	// ID is the stable message_id (unique within the trace). Writes with
	// an empty ID get a new ULID; Data is not rewritten then, so callers
	// normally set it to the message_id inside Data.
	ID string
	// Index is the event's position in the trace (set by the store).
	Index int
	// NodeIDs are the ledger node ids of the event (spec/ledger.md §7.2):
	// the primary node, then one per tool call. Opaque to the store.
	NodeIDs []string
	// Data is the normalised event JSON exactly as hashed and served.
	Data json.RawMessage
}

// NewTrace is one trace of a PushRequest.
type NewTrace struct {
	ID            string // "" = new UUIDv7
	Index         *int64 // nil = next counter value; set by uploads with explicit indices
	Name          string
	HierarchyPath []string
	Metadata      json.RawMessage // nil = {}
	SessionKey    string
	KeyID         string
	TimeCreated   time.Time // zero = now
	Messages      []Message
	// Annotations are inserted with the trace; their AnchorIndex refers to
	// this trace's messages.
	Annotations []*Annotation
	// Session overrides the defaults of the trace's ledger session; nil
	// means {ID: trace id, RunID: trace id, Signer: "server"}. Its ID and
	// RunID default to the trace id when empty.
	Session *Session
	// Status other than RunOpen finishes the run at push time: after
	// sealing, the session is closed with PushRequest.Close.
	Status RunStatus
}

// PushRequest is the input of PushTraces.
type PushRequest struct {
	OwnerID string
	// DatasetName is the dataset in the owner's namespace; "" pushes
	// snippets (traces without a dataset, index 0).
	DatasetName string
	// CreateIfMissing creates the dataset (private, with NewDatasetMetadata
	// or {} ) when the owner has none of that name.
	CreateIfMissing    bool
	NewDatasetMetadata json.RawMessage
	// RequireEmpty fails with ErrConflict when the dataset already has
	// traces (upload create mode).
	RequireEmpty bool
	// MergeMetadata, when non-nil, is merged into the dataset metadata
	// like PutDatasetMetadata with replaceAll=false.
	MergeMetadata map[string]json.RawMessage
	// ReplaceTakenIDs gives a trace whose explicit ID is already used a
	// new id instead of failing with ErrConflict.
	ReplaceTakenIDs bool
	Traces          []NewTrace
	Tools           []ToolUse
	// Seal computes receipts; nil writes none (tests, imports without
	// proof).
	Seal SealFunc
	// Close closes sessions of traces pushed with a finished Status; nil
	// leaves them open.
	Close CloseFunc
	// Prepare, when set, is called in the transaction for each trace, in
	// order (again if the transaction is retried), just before the store
	// writes it: it fills in nt.Messages, which the store lets go once
	// the trace's rows are queued (nt.Messages is then nil and the
	// result's trace has no Messages). A push too large to hold decoded
	// in memory uses it. An error aborts the push. Nil: Messages are set
	// in Traces.
	Prepare func(i int, nt *NewTrace) error
	// OTLPSpanIDs are recorded for OwnerID in the same transaction, as
	// MarkOTLPSpans would (OTLP ingest: the events and the ids of the
	// spans they came from are stored together or not at all).
	OTLPSpanIDs []string
}

// PushResult is the outcome of PushTraces.
type PushResult struct {
	Dataset        *Dataset // nil for snippets
	DatasetCreated bool
	Traces         []*Trace // in request order, with messages (none with Prepare)
}

// AppendRequest is the input of AppendEvents.
type AppendRequest struct {
	TraceID  string
	Messages []Message
	// Annotations are anchored in the same transaction; AnchorIndex is
	// an index in the resulting trace.
	Annotations []*Annotation
	Tools       []ToolUse
	Time        time.Time // zero = now; becomes TimeLastPushed
	Seal        SealFunc  // nil writes no receipts
	// Name and MetadataMerge update the trace as UpdateTrace does
	// (AppendMany only; nil: unchanged).
	Name          *string
	MetadataMerge json.RawMessage
	// OTLPSpanIDs are recorded for the trace's owner in the same
	// transaction, as MarkOTLPSpans would (AppendMany only; see
	// PushRequest.OTLPSpanIDs).
	OTLPSpanIDs []string
}

// AppendResult is the outcome of AppendEvents.
type AppendResult struct {
	Trace    *Trace    // without messages
	Messages []Message // the appended ones, with Index set
	Receipts []Receipt
}

// AppendOutcome is the outcome of one request of AppendMany: its result,
// or Err (ErrNotFound, ErrFinished) when its trace was not written.
type AppendOutcome struct {
	*AppendResult
	Err error
}

// TraceOrder is the order of ListTraces.
type TraceOrder int

// Trace orders; ties break on id.
const (
	OrderIndex              TraceOrder = iota // index ascending
	OrderIndexDesc                            // index descending
	OrderTimeCreated                          // time_created ascending
	OrderTimeCreatedDesc                      // time_created descending (snippets: newest first)
	OrderTimeLastPushed                       // time_last_pushed ascending
	OrderTimeLastPushedDesc                   // time_last_pushed descending
)

// TraceFilter selects traces. Zero fields do not filter.
type TraceFilter struct {
	DatasetID string
	OwnerID   string
	// Snippets keeps traces without a dataset (combine with OwnerID).
	Snippets   bool
	IDs        []string
	Indices    []int64
	SessionKey string
	// AfterIndex is a keyset cursor: only index > *AfterIndex.
	AfterIndex *int64
	// Status keeps runs in that status ("" = any).
	Status RunStatus
	// CreatedFrom/CreatedBefore bound TimeCreated (>= from, < before);
	// PushedFrom/PushedBefore bound TimeLastPushed the same way (search's
	// after:/before:/updated-*, finishing idle runs). Nil = unbounded.
	CreatedFrom, CreatedBefore *time.Time
	PushedFrom, PushedBefore   *time.Time
	Order                      TraceOrder
	Limit                      int // 0 = no limit
	Offset                     int
	// WithMessages fills in Messages.
	WithMessages bool
}

// IterOptions tunes IterTraces.
type IterOptions struct {
	// PageSize is how many traces are read per query; 0 = 100.
	PageSize int
	// OnlyAnnotated keeps traces with at least one annotation.
	OnlyAnnotated bool
	// IDs, when non-nil, keeps only those traces (a search result).
	IDs []string
}

// TraceUpdate holds the changes UpdateTrace applies.
type TraceUpdate struct {
	Name          *string
	HierarchyPath *[]string
	// MetadataMerge is an RFC 7386 merge patch applied to Metadata.
	MetadataMerge json.RawMessage
	Shared        *bool
}

// Annotation is a stored annotation (explorer-api §2.2).
type Annotation struct {
	ID      string
	TraceID string
	OwnerID string // the trace owner
	UserID  string // the author
	Content string
	// MessageID anchors the annotation to a message; Address is then the
	// rest of the address after the message step (e.g. ".content:0-5" or
	// ""). With no MessageID, Address is the whole address ("<root>",
	// or an unresolvable one).
	MessageID string
	Address   string
	// AnchorIndex, on writes only: when non-nil and MessageID is empty,
	// the store sets MessageID to the id of the message at that index;
	// if there is none, it sets Address = "messages.<i>" + Address and
	// Resolved = false.
	AnchorIndex   *int
	ExtraMetadata json.RawMessage // a JSON object or nil (null)
	// Source is extra_metadata.source ("" when absent); the store
	// derives it from ExtraMetadata on writes.
	Source      string
	Resolved    bool
	TimeCreated time.Time
}

// AnnotationUpdate holds the changes UpdateAnnotation applies.
type AnnotationUpdate struct {
	Content       *string
	MetadataMerge map[string]json.RawMessage
}

// Session is a ledger session (spec/ledger.md §6.1) plus its tail.
type Session struct {
	ID              string
	RunID           string // "" = null
	OwnerID         string
	Name            string
	Agent           string
	Signer          string // "server" or "agent"
	SignerPublicKey string // "" = null
	CreatedAt       time.Time
	ClosedAt        *time.Time
	TamperedAt      *time.Time
	TamperReason    json.RawMessage // {index|null, reason} or nil
	ReceiptCount    int64
	RootHash        string // "" = null
	CloseHash       string // "" = null
	CloseSignature  string // "" = null
	// Extra is free JSON for the SDK-compatible endpoints (created_by,
	// runtime, tags); nil = none.
	Extra json.RawMessage
	// SDKID is the id an @invariance/sdk client chose for the session
	// ("" = none: a server session). It is unique per owner, not across
	// owners, so ID (the row key, unique) is then a server-made id, and the
	// receipts carry SDKID as their sessionId (LedgerID).
	SDKID string
	// Tail is the chain tail, maintained by the store.
	Tail Tail
}

// LedgerID is the session id of the ledger (spec/ledger.md §6.1): the one
// its receipts and close statement carry. It is SDKID for SDK sessions,
// else ID.
func (s *Session) LedgerID() string {
	if s.SDKID != "" {
		return s.SDKID
	}
	return s.ID
}

// Status derives the session status: "tampered", "closed" or "open".
func (s *Session) Status() string {
	switch {
	case s.TamperedAt != nil:
		return "tampered"
	case s.ClosedAt != nil:
		return "closed"
	}
	return "open"
}

// Tail is the end of a session's chain.
type Tail struct {
	Count         int64  // receipts so far: the Seq of the next receipt
	LastHash      string // "0" when empty
	LastTimestamp int64  // milliseconds; 0 when empty
}

// SessionFilter selects sessions. Zero fields do not filter.
type SessionFilter struct {
	OwnerID string
	RunID   string
	Limit   int // 0 = no limit
	Offset  int
}

// Receipt is a stored receipt: the exact JSON text plus the columns the
// store indexes (spec/ledger.md §7.6).
type Receipt struct {
	SessionID string
	Seq       int64  // position in the chain, from 0; assigned by the store
	ID        string // unique per session
	Hash      string
	Timestamp int64  // milliseconds
	Text      string // the exact receipt JSON
}

// SealRequest is what a SealFunc sees: the locked session and the events
// being appended (none for AppendReceipts).
type SealRequest struct {
	Session *Session // with Tail; read-only
	// Trace is the run, without messages; nil for AppendReceipts. In a
	// push its Index is not assigned yet (indices are taken last, under
	// the dataset lock).
	Trace *Trace
	// FirstIndex is the index in the trace of Events[0].
	FirstIndex int
	Events     []Message
}

// SealFunc computes the receipts for the events of req, in chain order,
// starting from req.Session.Tail. It runs inside the write transaction with
// the session row locked, so it must be quick and must not call the store.
// Seq values in its result are ignored and reassigned from the tail. An
// error aborts the whole write and is returned wrapped.
type SealFunc func(ctx context.Context, req SealRequest) ([]Receipt, error)

// CloseStatement is what a CloseFunc returns (spec/ledger.md §6.3).
type CloseStatement struct {
	ClosedAt  time.Time
	Hash      string // the tail hash, "0" for an empty session
	Signature string
}

// CloseFunc computes the close statement of the locked session s (with its
// final Tail). It runs inside the write transaction.
type CloseFunc func(ctx context.Context, s *Session) (CloseStatement, error)

// AgentKey is a registered agent public key (spec/ledger.md §7.6).
type AgentKey struct {
	Agent     string
	PublicKey string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// OTLPSpans remembers the span ids OTLP ingest has stored (package otlp),
// so that an exporter's retry adds nothing even after a restart or on
// another process sharing the database.
type OTLPSpans interface {
	// MarkOTLPSpans records spanIDs of ownerID as stored at at; ids
	// already recorded are kept as they are.
	MarkOTLPSpans(ctx context.Context, ownerID string, spanIDs []string, at time.Time) error
	// SeenOTLPSpans returns those of spanIDs recorded for ownerID.
	SeenOTLPSpans(ctx context.Context, ownerID string, spanIDs []string) (map[string]bool, error)
	// PurgeOTLPSpans deletes the records made before before and returns
	// how many it deleted.
	PurgeOTLPSpans(ctx context.Context, before time.Time) (int, error)
}
