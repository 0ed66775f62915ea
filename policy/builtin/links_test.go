package builtin

import (
	"slices"
	"testing"
)

func TestLinksUnicodeWordCharacters(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"see https://example.com/a?b=1 and http://x.org", []string{"https://example.com/a?b=1", "http://x.org"}},
		{"münchen: https://bücher.de/straße ok", []string{"https://bücher.de/straße"}},
		{"escaped https://ex%41mple.com/x\"quoted", []string{"https://ex%41mple.com/x"}},
		{"repeat https://a.io https://a.io", []string{"https://a.io"}},
		{"no scheme www.example.com, ftp://x", nil},
	}
	for _, tt := range tests {
		if got := Links(tt.in, map[string]bool{}); !slices.Equal(got, tt.want) {
			t.Errorf("Links(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
