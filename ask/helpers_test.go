package ask_test

import (
	"crypto/sha256"
	"errors"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"
)

// fmtSscan parses "messages.<i><rest>".
func fmtSscan(a string, idx *int, rest *string) (int, error) {
	s, ok := strings.CutPrefix(a, "messages.")
	if !ok {
		return 0, strconv.ErrSyntax
	}
	end := strings.IndexAny(s, ".:")
	if end < 0 {
		end = len(s)
	}
	i, err := strconv.Atoi(s[:end])
	if err != nil {
		return 0, err
	}
	*idx, *rest = i, s[end:]
	return 2, nil
}

// ulidFor is a deterministic ULID for finding k of a seeded trace.
func ulidFor(name string, k int) string {
	sum := sha256.Sum256([]byte(name + "/" + strconv.Itoa(k)))
	var id ulid.ULID
	copy(id[6:], sum[:10])
	id[0] = 1
	return id.String()
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
