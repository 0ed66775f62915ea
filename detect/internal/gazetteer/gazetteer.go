// Package gazetteer is the embedded table of given names, surnames and
// places behind detect's offline PERSON and LOCATION recogniser.
//
// The table (table.txt) is built by gen.go from public npm packages
// (SOURCES.md names each source and its licence) and committed. Nothing
// is decoded at package initialisation: the first Lookup loads it, so a
// process that never asks pays nothing but the embedded bytes.
//
// Goals: one lookup per candidate word, a cold load well under 150 ms.
// Non-goals: knowing what a name refers to; that is the recogniser's
// context rules' job (package detect, names.go).
package gazetteer

//go:generate go run gen.go

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"
)

// Flags says what a table key is. A key can be several things at once
// ("jordan" is a given name, a surname and a country).
type Flags uint16

// The flag bits (gen.go writes the same values).
const (
	Given      Flags = 1 << iota // a given name in some culture
	Surname                      // a family name in some culture
	Country                      // a country's name in some language
	Region                       // a first-level administrative region
	City                         // a populated place of 1,000+ inhabitants
	BigCity                      // a populated place of 100,000+ inhabitants
	Common                       // an ordinary English word (SCOWL sizes 10-35)
	MultiStart                   // the first word of a longer key ("new" of "new delhi")
	Name                         // a given name or a surname (from a list that does not say which)
)

// Person reports whether f names a person's given name or surname.
func (f Flags) Person() bool { return f&(Given|Surname|Name) != 0 }

// Place reports whether f names a country, region or city.
func (f Flags) Place() bool { return f&(Country|Region|City) != 0 }

//go:embed table.txt
var table []byte

var (
	once sync.Once
	tab  *sortedTable
	err  error
)

// sortedTable holds the decoded keys in order, each followed by a
// newline, the offset of each key, its flags, and for each first two
// bytes of a key the range of keys that start with them. A lookup is a
// binary search in that range.
type sortedTable struct {
	data    []byte
	lines   []uint32 // offset of each key; lines[len-1] == len(data)
	flags   []Flags
	buckets []uint32 // buckets[b] = first key whose first two bytes are >= b
}

// Load decodes the table if that has not happened yet. It is safe for
// concurrent use; Lookup calls it.
func Load() error {
	once.Do(func() { tab, err = decode(table) })
	return err
}

// Lookup returns the flags of key, which must be lower case with single
// spaces between words (as gen.go writes keys); 0 when the key is not in
// the table or the table failed to load.
func Lookup(key string) Flags {
	if Load() != nil || len(key) < 2 {
		return 0
	}
	return tab.lookup(key)
}

// Len returns the number of keys in the table (0 when it failed to load).
func Len() int {
	if Load() != nil {
		return 0
	}
	return len(tab.lines) - 1
}

func bucketOf(k string) int { return int(k[0])<<8 | int(k[1]) }

func (t *sortedTable) lookup(k string) Flags {
	b := bucketOf(k)
	lo, hi := int(t.buckets[b]), int(t.buckets[b+1])
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := compare(t.data[t.lines[m]:t.lines[m+1]-1], k); {
		case c == 0:
			return t.flags[m]
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0
}

// compare is bytes.Compare of a and []byte(b) without the conversion.
func compare(a []byte, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

// decode reads the front-coded lines of gen.go: a byte 32+n (n: the
// length of the prefix shared with the previous key), the rest of the
// key, a tab, the flags in hex, a newline. The table is not compressed:
// expanding it is a single pass, where gunzip took most of a cold load.
func decode(in []byte) (*sortedTable, error) {
	nlines := bytes.Count(in, []byte{'\n'})
	t := &sortedTable{
		data:    make([]byte, 0, len(in)*3/2),
		lines:   make([]uint32, 0, nlines+1),
		flags:   make([]Flags, 0, nlines),
		buckets: make([]uint32, 1<<16+1),
	}
	prevKey := 0 // offset of the previous line in t.data
	prevLen := 0 // length of its key
	nextBucket := 0
	for line := 1; len(in) > 0; line++ {
		nl := bytes.IndexByte(in, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("gazetteer table: line %d: no newline at the end", line)
		}
		row := in[:nl]
		in = in[nl+1:]
		tb := bytes.IndexByte(row, '\t')
		if tb < 1 || tb == len(row)-1 || len(row)-tb-1 > 4 {
			return nil, fmt.Errorf("gazetteer table: line %d: want prefix byte, key, tab, flags", line)
		}
		shared := int(row[0]) - 32
		if shared < 0 || shared > prevLen {
			return nil, fmt.Errorf("gazetteer table: line %d: shared prefix %d longer than the previous key", line, shared)
		}
		f := Flags(0)
		for _, c := range row[tb+1:] {
			f <<= 4
			switch {
			case c >= '0' && c <= '9':
				f |= Flags(c - '0')
			case c >= 'a' && c <= 'f':
				f |= Flags(c - 'a' + 10)
			default:
				return nil, fmt.Errorf("gazetteer table: line %d: flags %q are not hex", line, row[tb+1:])
			}
		}
		start := len(t.data)
		t.data = append(t.data, t.data[prevKey:prevKey+shared]...)
		t.data = append(t.data, row[1:tb]...)
		t.data = append(t.data, '\n')
		keyLen := shared + tb - 1
		if keyLen < 2 {
			return nil, fmt.Errorf("gazetteer table: line %d: key shorter than two bytes", line)
		}
		key := t.data[start : start+keyLen]
		if len(t.lines) > 0 && bytes.Compare(t.data[prevKey:prevKey+prevLen], key) >= 0 {
			return nil, fmt.Errorf("gazetteer table: line %d: key %q out of order", line, key)
		}
		for b := int(key[0])<<8 | int(key[1]); nextBucket <= b; nextBucket++ {
			t.buckets[nextBucket] = uint32(len(t.lines))
		}
		t.lines = append(t.lines, uint32(start))
		t.flags = append(t.flags, f)
		prevKey, prevLen = start, keyLen
	}
	for ; nextBucket < len(t.buckets); nextBucket++ {
		t.buckets[nextBucket] = uint32(len(t.lines))
	}
	t.lines = append(t.lines, uint32(len(t.data)))
	return t, nil
}
