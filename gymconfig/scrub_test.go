package gymconfig_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/lens"
)

func TestScrubURLs(t *testing.T) {
	const r = lens.Redacted
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain text", "plain text"},
		{"http://127.0.0.1:4318", "http://127.0.0.1:4318"},
		{"https://api.example/v1/chat", "https://api.example/v1/chat"},
		{"http://user:pass@host:4318/v1/traces", "http://" + r + "@host:4318/v1/traces"},
		{"http://token@host", "http://" + r + "@host"},
		{"https://host/v1?api_key=abc&x=1", "https://host/v1?" + r},
		{"https://host/v1#access_token=abc", "https://host/v1#" + r},
		{"https://u:p@host/v1?k=v#f", "https://" + r + "@host/v1?" + r + "#" + r},
		{"https://host/v1?", "https://host/v1?"},
		{"grpc+tls://u:p@collector:4317", "grpc+tls://" + r + "@collector:4317"},
		{"--base-url=https://u:p@h/v1 --other x", "--base-url=https://" + r + "@h/v1 --other x"},
		{"a http://u:p@h1/?q=1 b 'https://h2/?t=2' c", "a http://" + r + "@h1/?" + r + " b 'https://h2/?" + r + "' c"},
		{"https://u:pa?ss@host/x", "https://" + r + "@host/x"},
		{"https://host/a@b", "https://host/a@b"},
		{"://u:p@host?x", "://u:p@host?x"},
		{"1://x?y", "1://x?y"},
		{"http://a?next=http://u:p@b/", "http://a?" + r},
		{"mailto:user@example.com", "mailto:user@example.com"},
	} {
		if got := gymconfig.ScrubURLs(c.in); got != c.want {
			t.Errorf("ScrubURLs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The config dict a run records shows each URL without its credentials,
// wherever the URL sits; secrets under sensitive keys are still replaced
// whole.
func TestRedactedScrubsURLs(t *testing.T) {
	doc := fleet + "upstream_url: https://me:hunter2@models.example/v1?key=abc\n" +
		"endpoints: [http://a:b@h1/, 'plain']\nflags: {cmd: '--url=http://c:d@h2/x?y=z'}\n"
	r := mustResolve(t, doc, noEnv).Redacted()
	const red = lens.Redacted
	if got, want := r["upstream_url"], "https://"+red+"@models.example/v1?"+red; got != want {
		t.Errorf("upstream_url = %v, want %v", got, want)
	}
	if got := r["endpoints"].([]any); got[0] != "http://"+red+"@h1/" || got[1] != "plain" {
		t.Errorf("endpoints = %v", got)
	}
	if got := r["flags"].(map[string]any)["cmd"]; got != "--url=http://"+red+"@h2/x?"+red {
		t.Errorf("flags.cmd = %v", got)
	}
	if r["policy_api_key"] != red {
		t.Errorf("policy_api_key = %v", r["policy_api_key"])
	}
}

// An instance whose host is empty listens on, and is reached at,
// loopback: never every interface.
func TestInstanceAddrEmptyHostIsLoopback(t *testing.T) {
	c := mustResolve(t, "x:\n  resources_servers:\n    y: {host: '', port: 1234}\n", noEnv)
	in, _ := c.Instance("x")
	if got := in.Addr(); got != "127.0.0.1:1234" {
		t.Errorf("Addr() = %q, want 127.0.0.1:1234", got)
	}
}

// FuzzScrubURLs checks that ScrubURLs never panics, changes nothing
// without "://", is idempotent, and leaves no user information, query or
// fragment other than the marker on a URL net/url reads from its output.
func FuzzScrubURLs(f *testing.F) {
	for _, seed := range []string{"", "http://u:p@h/?q#f", "x https://h/a?b c", "a://", "://@?#", "http://[::1]:80/?x", "s://a@b@c/d?e#f", "A:?://"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := gymconfig.ScrubURLs(s)
		if !strings.Contains(s, "://") && got != s {
			t.Fatalf("ScrubURLs(%q) = %q: changed a string without a URL", s, got)
		}
		if again := gymconfig.ScrubURLs(got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
		}
		for field := range strings.FieldsSeq(got) {
			i := strings.Index(field, "://")
			if i <= 0 || strings.ContainsAny(field, "\"'<>`") {
				continue
			}
			u, err := url.Parse(field)
			// Only "scheme://..." is a URL here: net/url also reads
			// "a:?://" as scheme "a" with query "://", which has no
			// authority, so no user information to leak.
			if err != nil || u.Scheme == "" || len(u.Scheme) != i {
				continue
			}
			if u.User != nil && u.User.String() != url.PathEscape(lens.Redacted) && u.User.Username() != lens.Redacted {
				t.Fatalf("ScrubURLs(%q) = %q: user information %q left", s, got, u.User)
			}
			if u.RawQuery != "" && u.RawQuery != lens.Redacted {
				t.Fatalf("ScrubURLs(%q) = %q: query %q left", s, got, u.RawQuery)
			}
		}
	})
}
