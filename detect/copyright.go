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
	{"MIT_LICENSE", "MIT License Copyright (c) <year> <copyright holders>"},
	{"BOOST_SOFTWARE_LICENSE", "Boost Software License - Version 1.0 - August 17th, 2003"},
}

// copyrightMarkers are the notices that give "COPYRIGHT".
var copyrightMarkers = []string{"Copyright (C)", "Copyright ©"}

func licenseWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.'
	})
}

// Copyright returns the licences and copyright notices in text: the
// licence whose header the trimmed text starts with, otherwise every
// licence more than half of whose header words occur in the text
// (case-insensitively), then "COPYRIGHT" when the text contains
// "Copyright (C)" or "Copyright ©".
func Copyright(text string) []string {
	var out []string
	trimmed := strings.TrimSpace(text)
	for _, l := range licenseHeaders {
		if strings.HasPrefix(trimmed, l.header) || strings.HasPrefix(l.header, "MIT") && strings.HasPrefix(trimmed, "MIT License") {
			out = append(out, l.name)
			break
		}
	}
	if out == nil {
		words := map[string]bool{}
		for _, w := range licenseWords(text) {
			words[w] = true
		}
		for _, l := range licenseHeaders {
			hw := licenseWords(l.header)
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
