package detect

import (
	"strings"
	"unicode"
)

// licenseHeaders are the licence names copyright reports, with the header
// text that identifies each (the reference's table).
var licenseHeaders = []struct{ name, header string }{
	{"GNU_AGPL_V3", "GNU AFFERO GENERAL PUBLIC LICENSE Version 3, 19 November 2007"},
	{"GNU_GPL_V2", "GNU GENERAL PUBLIC LICENSE Version 2, June 1991"},
	{"GNU_LGPL_V3", "GNU LESSER GENERAL PUBLIC LICENSE Version 3, 29 June 2007"},
	{"MOZILLA_PUBLIC_LICENSE_2.0", "Mozilla Public License Version 2.0"},
	{"APACHE_LICENSE_2.0", "Apache License Version 2.0, January 2004"},
	{"MIT_LICENSE", "MIT License Permission is hereby granted, free of charge, to any person obtaining a copy"},
	{"BOOST_SOFTWARE_LICENSE", "Boost Software License - Version 1.0 - August 17th, 2003"},
}

// copyrightMarkers are the notices that give "COPYRIGHT".
var copyrightMarkers = []string{"Copyright (C)", "Copyright ©"}

// licenseStopWords are header words shared by several licences; they do
// not count as evidence for any one of them.
var licenseStopWords = map[string]bool{"license": true, "version": true, "public": true, "general": true, "gnu": true,
	"software": true, "the": true, "of": true, "and": true, "is": true, "to": true, "a": true, "an": true, "any": true}

func licenseWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.'
	})
}

// headerWords are the distinctive words of a licence header.
func headerWords(header string) []string {
	var out []string
	for _, w := range licenseWords(header) {
		if !licenseStopWords[w] {
			out = append(out, w)
		}
	}
	return out
}

// Copyright returns the licences and copyright notices in text: the
// licence whose header the trimmed text starts with, otherwise every
// licence more than half of whose distinctive header words (words shared
// by several licences, such as "license" or "public", do not count) occur
// in the text, case-insensitively; then "COPYRIGHT" when the text
// contains "Copyright (C)" or "Copyright ©". The reference compares with
// the full licence texts; Vigil keeps only their headers (and the MIT
// permission sentence), so a licence body without its header is missed.
func Copyright(text string) []string {
	var out []string
	trimmed := strings.TrimSpace(text)
	for _, l := range licenseHeaders {
		if strings.HasPrefix(trimmed, l.header) || l.name == "MIT_LICENSE" && strings.HasPrefix(trimmed, "MIT License") {
			out = append(out, l.name)
			break
		}
	}
	if out == nil {
		words := map[string]bool{}
		for _, w := range licenseWords(text) {
			words[strings.TrimRight(w, ".")] = true
			words[w] = true
		}
		for _, l := range licenseHeaders {
			hw := headerWords(l.header)
			n := 0
			for _, w := range hw {
				if words[w] {
					n++
				}
			}
			if 2*n > len(hw) {
				out = append(out, l.name)
			}
		}
	}
	for _, m := range copyrightMarkers {
		if strings.Contains(text, m) {
			out = append(out, "COPYRIGHT")
			break
		}
	}
	return out
}
