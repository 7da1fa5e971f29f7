package gymconfig

import (
	"strings"

	"github.com/gymlens/gymlens/lens"
)

// ScrubURLs returns s with the credentials of every URL in it replaced by
// lens.Redacted: the user information ("user:password@"), the query and
// the fragment, which is where a token in a URL lives (an OTLP endpoint's
// ?api_key=..., a model upstream's https://key@host/v1). A URL is a scheme
// ("https", "grpc+tls", ...) followed by "://" and runs to the next
// whitespace, quote, '<', '>' or '`'; it may sit anywhere in s
// ("--base-url=https://u:p@h/v1"). Everything else is kept byte for byte,
// so a string with no URL, or with URLs that carry no credentials, comes
// back unchanged, and scrubbing twice is scrubbing once.
//
// It is the one scrubber of everything gymlens writes into a run
// directory: config.yaml (through Config.Redacted and for the URLs and
// commands of the running fleet), the telemetry settings it echoes, and
// the run's identity file.
func ScrubURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "://")
		if i < 0 {
			break
		}
		start := schemeStart(rest, i)
		if start == i { // "://" with no scheme before it: not a URL
			b.WriteString(rest[:i+3])
			rest = rest[i+3:]
			continue
		}
		end := i + 3
		for end < len(rest) && !endsURL(rest[end]) {
			end++
		}
		b.WriteString(rest[:i+3])
		b.WriteString(scrubAfterScheme(rest[i+3 : end]))
		rest = rest[end:]
	}
	b.WriteString(rest)
	return b.String()
}

// schemeStart returns where the scheme ending at i (the index of "://")
// begins: a letter followed by letters, digits, '+', '-' or '.' (RFC 3986);
// i itself when there is none.
func schemeStart(s string, i int) int {
	start := i
	for start > 0 && isSchemeByte(s[start-1]) {
		start--
	}
	for start < i && !isLetter(s[start]) { // a scheme starts with a letter
		start++
	}
	return start
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isSchemeByte(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// endsURL reports whether c cannot be part of a URL written in text.
func endsURL(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\f', '\v', '"', '\'', '<', '>', '`':
		return true
	}
	return false
}

// scrubAfterScheme scrubs what follows "scheme://". The user information
// is everything before the last '@' ahead of the first '/', so a password
// with an unescaped '?' or '#' goes too; the query and fragment start at
// the first '?' and '#' after it.
func scrubAfterScheme(u string) string {
	slash := strings.IndexByte(u, '/')
	if slash < 0 {
		slash = len(u)
	}
	if at := strings.LastIndexByte(u[:slash], '@'); at >= 0 && u[:at] != lens.Redacted {
		u = lens.Redacted + u[at:]
	}
	head := ""
	if strings.HasPrefix(u, lens.Redacted+"@") {
		head, u = u[:len(lens.Redacted)+1], u[len(lens.Redacted)+1:]
	}
	fragment := ""
	if h := strings.IndexByte(u, '#'); h >= 0 {
		u, fragment = u[:h], u[h:]
	}
	query := ""
	if q := strings.IndexByte(u, '?'); q >= 0 {
		u, query = u[:q], u[q:]
	}
	if len(query) > 1 {
		query = "?" + lens.Redacted
	}
	if len(fragment) > 1 {
		fragment = "#" + lens.Redacted
	}
	return head + u + query + fragment
}
