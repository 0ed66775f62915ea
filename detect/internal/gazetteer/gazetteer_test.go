package gazetteer

import (
	"sync"
	"testing"
)

// TestLookupConcurrentFirstUse: the first lookups, from many goroutines
// at once, all wait for the one load (run it with -race). It is the first
// test of the package so that the table is not loaded yet.
func TestLookupConcurrentFirstUse(t *testing.T) {
	var wg sync.WaitGroup
	got := make([]Flags, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = Lookup("berlin")
		}()
	}
	wg.Wait()
	for i, f := range got {
		if f&City == 0 {
			t.Errorf("goroutine %d: Lookup(berlin) = %#x", i, f)
		}
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		key  string
		want Flags // bits that must be set
		not  Flags // bits that must be clear
	}{
		{"angela", Given, Country},
		{"berlin", City | BigCity, 0},
		{"germany", Country, 0},
		{"deutschland", Country, 0},
		{"bavaria", Region, 0},
		{"zürich", City, 0},
		{"zurich", City, 0}, // folded form of "Zürich"
		{"will", Common | Given, 0},
		{"murphy", Given | Surname, 0},
		{"new", MultiStart, 0},
		{"sato", Name, Place()},
		{"frankfurt", City | BigCity, 0}, // "Frankfurt am Main" without its qualifier
		{"the quick", 0, ^Flags(0)},
	}
	for _, tt := range tests {
		got := Lookup(tt.key)
		if got&tt.want != tt.want || got&tt.not != 0 {
			t.Errorf("Lookup(%q) = %#x, want bits %#x set and %#x clear", tt.key, got, tt.want, tt.not)
		}
	}
	if n := Len(); n < 300000 {
		t.Errorf("Len() = %d, want the whole table (> 300,000 keys)", n)
	}
}

// Place is every place bit.
func Place() Flags { return Country | Region | City | BigCity }

func TestDecodeErrors(t *testing.T) {
	raw := func(s string) []byte { return []byte(s) }
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"no tab", raw(" anna\t1\n bob\n"), "gazetteer table: line 2: want prefix byte, key, tab, flags"},
		{"bad flags", raw(" anna\tzz\n"), `gazetteer table: line 1: flags "zz" are not hex`},
		{"prefix too long", raw(" anna\t1\n*b\t1\n"), "gazetteer table: line 2: shared prefix 10 longer than the previous key"},
		{"out of order", raw(" bob\t1\n anna\t1\n"), `gazetteer table: line 2: key "anna" out of order`},
		{"no final newline", raw(" anna\t1"), "gazetteer table: line 1: no newline at the end"},
		{"short key", raw(" a\t1\n"), "gazetteer table: line 1: key shorter than two bytes"},
	}
	for _, tt := range tests {
		_, err := decode(tt.in)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: decode error = %v, want %q", tt.name, err, tt.want)
		}
	}
	// "anna", "anne" (3 shared), "rio de janeiro": front-coded.
	m, err := decode(raw(" anna\t3\n#e\t1\n rio de janeiro\t10\n"))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]Flags{"anna": Given | Surname, "anne": Given, "rio de janeiro": City, "ann": 0, "annex": 0, "zz": 0, "aa": 0} {
		if got := m.lookup(k); got != want {
			t.Errorf("lookup(%q) = %#x, want %#x", k, got, want)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := decode(table); err != nil {
			b.Fatal(err)
		}
	}
}

func TestEmbeddedTableDecodes(t *testing.T) {
	if _, err := decode(table); err != nil {
		t.Fatal(err)
	}
}
