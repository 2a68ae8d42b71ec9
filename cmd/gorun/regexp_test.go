package main

import "regexp"

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

func regexpFind(re, s string) string {
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if len(m) < 2 {
		return ""
	}
	return m[1]
}

func regexpQuote(s string) string { return regexp.QuoteMeta(s) }
