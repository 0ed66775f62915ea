package detect

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestTOML(t *testing.T) {
	src := `# comment
title = "t\u00e9st \"q\"" # trailing comment
n = 3
f = 2.5
b = true
[allowlist]
regexes = [
    '''a'b''',   # literal with a quote
    "c\\d",
]
[[rules]]
id = 'one'
regex = """
multi"""
[[rules.allowlists]]
stopwords = []
[[rules]]
id = "two"
`
	got, err := parseTOML("x.toml", src)
	if err != nil {
		t.Fatal(err)
	}
	want := tomlTable{
		"title":     `tést "q"`,
		"n":         int64(3),
		"f":         2.5,
		"b":         true,
		"allowlist": tomlTable{"regexes": []any{"a'b", `c\d`}},
		"rules": []tomlTable{
			{"id": "one", "regex": "multi", "allowlists": []tomlTable{{"stopwords": []any{}}}},
			{"id": "two"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	errs := []struct{ src, want string }{
		{"a = 1\na = 2\n", "x.toml:2:1: duplicate key \"a\""},
		{"a = {b = 1}\n", "x.toml:1:5: inline tables are not supported"},
		{"a.b = 1\n", "x.toml:1:2: dotted keys are not supported"},
		{"a = [1, 2\n", "x.toml:1:5: unterminated array"},
		{"a = '''x\n", "x.toml:1:5: unterminated multi-line string"},
		{"a = \"\\q\"\n", "invalid escape \\q"},
		{"a = 1 b\n", "x.toml:1:7: unexpected 'b' after value"},
		{"[a]\n[a]\nx = 1\n[[a]]\n", "x.toml:4:1: key \"a\" is not an array of tables"},
		{"é = 1\n", "x.toml:1:1: expected a key"},
	}
	for _, e := range errs {
		_, err := parseTOML("x.toml", e.src)
		var te *tomlError
		if err == nil || !strings.Contains(err.Error(), e.want) || !errors.As(err, &te) {
			t.Errorf("parseTOML(%q) = %v, want %q", e.src, err, e.want)
		}
	}
}

func TestKeywordSet(t *testing.T) {
	k := newKeywordSet([]string{"he", "she", "his", "hers", "a3-"})
	hits := k.scan("uSHErs and A3-x", nil)
	var got []string
	for _, h := range hits {
		got = append(got, k.words[h.Word])
	}
	if want := []string{"she", "he", "hers", "a3-"}; !reflect.DeepEqual(got, want) {
		t.Errorf("hits %q, want %q", got, want)
	}
}

// FuzzKeywordSet compares the automaton with a naive search.
func FuzzKeywordSet(f *testing.F) {
	f.Add("ab,b,abc,c", "xxABCabcbc")
	f.Add("ghp_,xox,-----begin", "-----BEGIN ghp_ XOX")
	f.Fuzz(func(t *testing.T, words, text string) {
		ws := strings.Split(words, ",")
		if len(ws) > 50 {
			return
		}
		for _, w := range ws {
			if len(w) > 20 {
				return
			}
		}
		k := newKeywordSet(ws)
		hits := k.scan(text, nil)
		// The complete table finds the same, in the same order.
		d := k.buildFull()
		if full := k.scanFull(d, text, nil); !reflect.DeepEqual(full, hits) {
			t.Fatalf("complete table: %v, lazy table: %v", full, hits)
		}
		got := map[[2]int]bool{}
		for _, h := range hits {
			got[[2]int{int(h.Word), h.End}] = true
		}
		lower := func(s string) string {
			b := []byte(s)
			for i := range b {
				b[i] = lowerASCII(b[i])
			}
			return string(b)
		}
		lt := lower(text)
		want := map[[2]int]bool{}
		for wi, w := range ws {
			lw := lower(w)
			if w == "" {
				continue
			}
			for i := 0; i+len(lw) <= len(lt); i++ {
				if lt[i:i+len(lw)] == lw {
					want[[2]int{wi, i + len(lw)}] = true
				}
			}
		}
		for h := range want {
			if !got[h] {
				t.Fatalf("missed %q ending at %d in %q", ws[h[0]], h[1], text)
			}
		}
		for h := range got {
			if !want[h] {
				t.Fatalf("false hit %q ending at %d in %q", ws[h[0]], h[1], text)
			}
		}
		for i := 1; i < len(hits); i++ {
			if hits[i].End < hits[i-1].End {
				t.Fatalf("hits out of text order: %v", hits)
			}
		}
	})
}

// TestKeywordSetConcurrentScans scans from several goroutines on a fresh
// set (run with -race): the lazily filled table, and the complete one
// built midway, give every scan the same hits.
func TestKeywordSetConcurrentScans(t *testing.T) {
	defer func(n int64) { keywordFullAfter = n }(keywordFullAfter)
	words := []string{"he", "she", "his", "hers", "ghp_", "xoxb-", "-----begin"}
	text := strings.Repeat("ushers and his GHP_ token -----BEGIN xoxb- she ", 50)
	want := len(newKeywordSet(words).scan(text, nil))
	keywordFullAfter = int64(len(text)) * 3
	k := newKeywordSet(words)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 3 {
				if got := len(k.scan(text, nil)); got != want {
					t.Errorf("%d hits, want %d", got, want)
				}
			}
		})
	}
	wg.Wait()
	if k.full.Load() == nil {
		t.Error("complete table not built after 24 scans")
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := NewCache(8)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				key := string(rune('a' + (i+g)%12))
				v, err := c.Do("d", "", key, func() (any, error) { return key, nil })
				if err != nil || v != key {
					t.Errorf("Do(%q) = %v, %v", key, v, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	if c.Len() > 8 {
		t.Errorf("cache holds %d entries, bound is 8", c.Len())
	}
}

func TestKeywordSetAllBytes(t *testing.T) {
	var b []byte
	for c := 0; c < 256; c++ {
		b = append(b, byte(c))
	}
	k := newKeywordSet([]string{string(b), "\xff\x00"})
	if hits := k.scan("x\xff\x00y", nil); len(hits) != 1 || hits[0].End != 3 {
		t.Errorf("hits %v", hits)
	}
}
