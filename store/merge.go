package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// MergeMetadata applies a dataset-metadata patch to the JSON object cur with
// the semantics of PutDatasetMetadata (explorer-api §4.2) and returns the new
// object text (keys sorted). Both backends call it inside their transaction.
func MergeMetadata(cur json.RawMessage, patch map[string]json.RawMessage, replaceAll bool) (json.RawMessage, error) {
	m, err := decodeObject(cur)
	if err != nil {
		return nil, fmt.Errorf("stored metadata: %w", err)
	}
	if replaceAll {
		for k := range m {
			if slices.Contains(SystemMetadataKeys, k) {
				continue
			}
			if v, ok := patch[k]; !ok || isNull(v) {
				delete(m, k)
			}
		}
	}
	for k, v := range patch {
		if isNull(v) {
			continue
		}
		if replaceAll && slices.Contains(SystemMetadataKeys, k) {
			continue
		}
		m[k] = v
	}
	return json.Marshal(m)
}

// MergePatch applies the RFC 7386 JSON merge patch to the JSON object cur
// (nil or null = {}) and returns the result. A patch that is not an object
// replaces the whole value, as the RFC says; the caller normally rejects
// that first.
func MergePatch(cur, patch json.RawMessage) (json.RawMessage, error) {
	p, err := decodeKeepNumbers(patch)
	if err != nil {
		return nil, fmt.Errorf("merge patch: %w", err)
	}
	var c any
	if len(bytes.TrimSpace(cur)) > 0 {
		if c, err = decodeKeepNumbers(cur); err != nil {
			return nil, fmt.Errorf("stored metadata: %w", err)
		}
	}
	return json.Marshal(mergePatch(c, p))
}

// decodeKeepNumbers decodes one JSON value with numbers as json.Number, so
// re-encoding keeps their digits (float64 would round integers above 2^53).
func decodeKeepNumbers(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("invalid JSON: data after the value")
	}
	return v, nil
}

func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
			continue
		}
		tm[k] = mergePatch(tm[k], v)
	}
	return tm
}

// MergeShallow sets patch's members on the JSON object cur (nil or null =
// {}); a null member is set to null. It is the annotation-update merge of
// explorer-api §6.
func MergeShallow(cur json.RawMessage, patch map[string]json.RawMessage) (json.RawMessage, error) {
	m, err := decodeObject(cur)
	if err != nil {
		return nil, fmt.Errorf("stored extra_metadata: %w", err)
	}
	for k, v := range patch {
		m[k] = v
	}
	return json.Marshal(m)
}

// AnnotationSource returns extra_metadata.source when it is a string, else "".
// The member name is matched exactly ("Source" is another key).
func AnnotationSource(extra json.RawMessage) string { return stringMember(extra, "source") }

// AnnotationStatus returns extra_metadata.status when it is a string, else "".
func AnnotationStatus(extra json.RawMessage) string { return stringMember(extra, "status") }

// stringMember returns the string member name of the JSON object raw, or "".
// (Decoding into a struct would match member names case-insensitively.)
func stringMember(raw json.RawMessage, name string) string {
	if len(raw) == 0 {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[name], &s) != nil {
		return ""
	}
	return s
}

func decodeObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
		return m, nil
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	return m, nil
}

func isNull(v json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}
