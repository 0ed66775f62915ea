package sqlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/vigilhq/vigil/store"
)

// PutBlob implements store.Blobs.
func (s *Store) PutBlob(ctx context.Context, b *store.Blob) error {
	sum := sha256.Sum256(b.Data)
	if h := hex.EncodeToString(sum[:]); b.SHA256 != h {
		return fmt.Errorf("put blob %s: data hashes to %s", b.SHA256, h)
	}
	b.Size = int64(len(b.Data))
	b.CreatedAt = orNow(b.CreatedAt)
	data := b.Data
	if data == nil {
		data = []byte{}
	}
	_, err := s.b.Writer().Exec(ctx, `INSERT INTO blobs (owner_id, sha256, content_type, size, data, created_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (owner_id, sha256) DO NOTHING`, b.OwnerID, b.SHA256, b.ContentType, b.Size, data, micros(b.CreatedAt))
	if err != nil {
		return fmt.Errorf("put blob %s: %w", b.SHA256, err)
	}
	return nil
}

// GetBlob implements store.Blobs.
func (s *Store) GetBlob(ctx context.Context, ownerID, sum string) (*store.Blob, error) {
	b := &store.Blob{}
	var created int64
	err := s.b.Reader().QueryRow(ctx, `SELECT owner_id, sha256, content_type, size, data, created_at FROM blobs WHERE owner_id = $1 AND sha256 = $2`,
		ownerID, sum).Scan(&b.OwnerID, &b.SHA256, &b.ContentType, &b.Size, &b.Data, &created)
	if err != nil {
		return nil, notFound(err, "blob "+sum)
	}
	b.CreatedAt = fromMicros(created)
	return b, nil
}

// DeleteBlob implements store.Blobs.
func (s *Store) DeleteBlob(ctx context.Context, ownerID, sum string) error {
	n, err := s.b.Writer().Exec(ctx, `DELETE FROM blobs WHERE owner_id = $1 AND sha256 = $2`, ownerID, sum)
	if err != nil {
		return fmt.Errorf("delete blob %s: %w", sum, err)
	}
	if n == 0 {
		return fmt.Errorf("delete blob %s: %w", sum, store.ErrNotFound)
	}
	return nil
}

// InitInstanceValue implements store.Instance.
func (s *Store) InitInstanceValue(ctx context.Context, name, value string) (string, error) {
	if _, err := s.b.Writer().Exec(ctx, `INSERT INTO instance_values (name, value, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO NOTHING`, name, value, micros(time.Now())); err != nil {
		return "", fmt.Errorf("init instance value %s: %w", name, err)
	}
	var stored string
	// Read on the writer, which saw the insert; this runs once per start.
	if err := s.b.Writer().QueryRow(ctx, `SELECT value FROM instance_values WHERE name = $1`, name).Scan(&stored); err != nil {
		return "", fmt.Errorf("read instance value %s: %w", name, err)
	}
	return stored, nil
}

const savedQueryCols = `id, dataset_id, owner_id, name, query, time_created`

func scanSavedQuery(r interface{ Scan(...any) error }) (*store.SavedQuery, error) {
	q := &store.SavedQuery{}
	var tc int64
	if err := r.Scan(&q.ID, &q.DatasetID, &q.OwnerID, &q.Name, &q.Query, &tc); err != nil {
		return nil, err
	}
	q.TimeCreated = fromMicros(tc)
	return q, nil
}

// CreateSavedQuery implements store.SavedQueries.
func (s *Store) CreateSavedQuery(ctx context.Context, q *store.SavedQuery) error {
	if q.ID == "" {
		q.ID = store.NewID()
	}
	q.TimeCreated = orNow(q.TimeCreated)
	return s.inTx(ctx, func(tx Tx) error {
		var owner string
		if err := tx.QueryRow(ctx, `SELECT owner_id FROM datasets WHERE id = $1`+s.b.ForUpdate(), q.DatasetID).Scan(&owner); err != nil {
			return notFound(err, "save query in dataset "+q.DatasetID)
		}
		if q.OwnerID == "" {
			q.OwnerID = owner
		}
		if _, err := tx.Exec(ctx, `INSERT INTO saved_queries (`+savedQueryCols+`) VALUES ($1, $2, $3, $4, $5, $6)`,
			q.ID, q.DatasetID, q.OwnerID, q.Name, q.Query, micros(q.TimeCreated)); err != nil {
			return s.conflict(err, "save query "+q.ID)
		}
		return nil
	})
}

// GetSavedQuery implements store.SavedQueries.
func (s *Store) GetSavedQuery(ctx context.Context, id string) (*store.SavedQuery, error) {
	q, err := scanSavedQuery(s.b.Reader().QueryRow(ctx, `SELECT `+savedQueryCols+` FROM saved_queries WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "saved query "+id)
	}
	return q, nil
}

// ListSavedQueries implements store.SavedQueries.
func (s *Store) ListSavedQueries(ctx context.Context, datasetID string) ([]*store.SavedQuery, error) {
	rows, err := s.b.Reader().Query(ctx, `SELECT `+savedQueryCols+` FROM saved_queries WHERE dataset_id = $1 ORDER BY time_created, id`, datasetID)
	if err != nil {
		return nil, fmt.Errorf("list saved queries of dataset %s: %w", datasetID, err)
	}
	defer rows.Close()
	var out []*store.SavedQuery
	for rows.Next() {
		q, err := scanSavedQuery(rows)
		if err != nil {
			return nil, fmt.Errorf("list saved queries of dataset %s: %w", datasetID, err)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list saved queries of dataset %s: %w", datasetID, err)
	}
	return out, nil
}

// DeleteSavedQuery implements store.SavedQueries.
func (s *Store) DeleteSavedQuery(ctx context.Context, id string) error {
	n, err := s.b.Writer().Exec(ctx, `DELETE FROM saved_queries WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete saved query %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("delete saved query %s: %w", id, store.ErrNotFound)
	}
	return nil
}

const idemCols = `principal, key, request_hash, status, content_type, body, created_at`

func scanIdem(r interface{ Scan(...any) error }) (*store.IdempotencyRecord, error) {
	rec := &store.IdempotencyRecord{}
	var created int64
	if err := r.Scan(&rec.Principal, &rec.Key, &rec.RequestHash, &rec.Status, &rec.ContentType, &rec.Body, &created); err != nil {
		return nil, err
	}
	rec.CreatedAt = fromMicros(created)
	return rec, nil
}

// ReserveIdempotencyKey implements store.Idempotency.
func (s *Store) ReserveIdempotencyKey(ctx context.Context, rec *store.IdempotencyRecord, expiredBefore time.Time) (*store.IdempotencyRecord, bool, error) {
	rec.CreatedAt = orNow(rec.CreatedAt)
	rec.Status, rec.Body, rec.ContentType = 0, nil, ""
	var out *store.IdempotencyRecord
	created := false
	err := s.inTx(ctx, func(tx Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2 AND created_at < $3`,
			rec.Principal, rec.Key, micros(expiredBefore)); err != nil {
			return fmt.Errorf("reserve idempotency key: %w", err)
		}
		n, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (`+idemCols+`) VALUES ($1, $2, $3, 0, '', NULL, $4)
			ON CONFLICT (principal, key) DO NOTHING`, rec.Principal, rec.Key, rec.RequestHash, micros(rec.CreatedAt))
		if err != nil {
			return fmt.Errorf("reserve idempotency key: %w", err)
		}
		if n == 1 {
			created, out = true, rec
			return nil
		}
		out, err = scanIdem(tx.QueryRow(ctx, `SELECT `+idemCols+` FROM idempotency_keys WHERE principal = $1 AND key = $2`, rec.Principal, rec.Key))
		if err != nil {
			return fmt.Errorf("reserve idempotency key: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// CompleteIdempotencyKey implements store.Idempotency.
func (s *Store) CompleteIdempotencyKey(ctx context.Context, principal, key string, status int, contentType string, body []byte) error {
	if status == 0 {
		return errors.New("complete idempotency key: status 0")
	}
	if body == nil {
		body = []byte{}
	}
	n, err := s.b.Writer().Exec(ctx, `UPDATE idempotency_keys SET status = $3, content_type = $4, body = $5 WHERE principal = $1 AND key = $2`,
		principal, key, status, contentType, body)
	if err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("complete idempotency key: %w", store.ErrNotFound)
	}
	return nil
}

// ReleaseIdempotencyKey implements store.Idempotency.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, principal, key string) error {
	if _, err := s.b.Writer().Exec(ctx, `DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2 AND status = 0`, principal, key); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotencyKeys implements store.Idempotency.
func (s *Store) PurgeIdempotencyKeys(ctx context.Context, before time.Time) (int, error) {
	n, err := s.b.Writer().Exec(ctx, `DELETE FROM idempotency_keys WHERE created_at < $1`, micros(before))
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return int(n), nil
}
