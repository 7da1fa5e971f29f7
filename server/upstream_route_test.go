package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/upstream"
	"github.com/gymlens/gymlens/server"
)

// upstreamPrefixProgram runs, for each request target on stdin, what
// nemo-gym 0.7.0 does with its path: uvicorn decodes it into scope["path"]
// (urllib.parse.unquote); a resources server's RolloutContextMiddleware
// (rollout_correlation.py:97-118) strips the prefix and sets the rollout
// id; a model server's _CaptureMiddleware matches _ROLLOUT_PATH_RE
// (base_responses_api_model.py:1059-1063, used at :1447-1453).
const upstreamPrefixProgram = `
import asyncio, json, sys
from urllib.parse import unquote
from nemo_gym.rollout_correlation import RolloutContextMiddleware, current_rollout_id
from nemo_gym.base_responses_api_model import _ROLLOUT_PATH_RE

async def main():
    targets = json.load(sys.stdin)
    seen = {}
    async def app(scope, receive, send):
        seen["path"] = scope["path"]
        seen["id"] = current_rollout_id()
    mw = RolloutContextMiddleware(app)
    out = []
    for target in targets:
        path = unquote(target)
        seen.clear()
        await mw({"type": "http", "path": path, "raw_path": target.encode()}, None, None)
        ok = seen["id"] is not None
        m = _ROLLOUT_PATH_RE.match(path)
        out.append({
            "path": path,
            "resources": [ok, seen["id"] or "", seen["path"] if ok else ""],
            "model": [m is not None, m.group("rollout_id") if m else "", m.group("rest") if m else ""],
        })
    json.dump(out, sys.stdout)

asyncio.run(main())
`

// prefixCorpus returns request targets (paths, percent-encoded where a
// request line needs it) around the /ng-rollout/<id>/ prefix: the product
// of odd prefixes, ids, token-capture segments and rests, then random
// paths built from the characters that matter.
func prefixCorpus() []string {
	prefixes := []string{"/ng-rollout/", "/ng-rollout", "//ng-rollout/", "/NG-ROLLOUT/", "/ng%2Drollout/", "/ng-rollout%2F"}
	ids := []string{"", "a", "7-2", "7-2-a1", "a.b_c-1", "A9", ".a", "-a", "_a", "a..b", ".", "..", "a.",
		"a%2Fb", "a%2fb", "a%20b", "a%0Ab", "a%0A", "%0A", "a%00b", "%C3%A9", "a%C3%A9", "a~b", "a+b", "a%25b",
		"a:b", "a@b", "a;b", "a%3Fb", "a%23b", "a%5Cb", "a%09b", "a%0Db", strings.Repeat("x", 300),
		"training-token-capture", "ng-rollout", "a%2E", "%2E%2E"}
	captures := []string{"", "/training-token-capture", "/training-token-capture/training-token-capture",
		"/Training-Token-Capture", "/training-token-capture%2F", "/training-token-capture%0A", "//training-token-capture",
		"/training-token-capturex"}
	rests := []string{"", "/", "/verify", "//verify", "/verify/", "/v1/responses", "/./verify", "/../verify",
		"/verify%0A", "/a%0Ab", "%0A", "/verify%0A%0A", "/ver%2Fify", "/%0A", "/%C3%A9", "/a%0D"}
	var out []string
	for _, p := range prefixes {
		for _, id := range ids {
			for _, c := range captures {
				for _, r := range rests {
					out = append(out, p+id+c+r)
				}
			}
		}
	}
	// Random paths over the pieces and characters that decide a match.
	pieces := []string{"/", "/", "ng-rollout", "training-token-capture", "a", "Z", "9", ".", "-", "_", "%2F", "%0A",
		"%0D", "%20", "%2E", "%25", "%C3%A9", "v1", "responses", "verify", "~", "%00", "%09"}
	r := rand.New(rand.NewPCG(36, 5))
	for range 5000 {
		var b strings.Builder
		b.WriteString("/ng-rollout/")
		for range r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		out = append(out, b.String())
	}
	return out
}

// stripped is what a server made of a path: whether it took a prefix
// off, the rollout id and the path it routed.
type stripped struct {
	OK   bool
	ID   string
	Rest string
}

// goStrip parses target as net/http's server parses a request line and
// runs it through gymlens's prefix stripping in mode. ok is false when
// net/http refuses the target.
func goStrip(t *testing.T, mode server.PrefixMode, target string) (s stripped, path string, ok bool) {
	t.Helper()
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("POST " + target + " HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")))
	if err != nil {
		return stripped{}, "", false
	}
	server.StripRolloutPrefix(mode, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if id := server.RolloutID(r.Context()); id != "" {
			s = stripped{OK: true, ID: id, Rest: r.URL.Path}
		}
	})).ServeHTTP(nil, req)
	return s, req.URL.Path, true
}

// TestUpstreamRolloutPrefix: on every path of the corpus, a resources
// server (PrefixResources) and a model server (PrefixModel) strip the
// /ng-rollout/<id>/ prefix exactly when nemo-gym 0.7.0's do, to the same
// rollout id and the same rest path.
func TestUpstreamRolloutPrefix(t *testing.T) {
	corpus := prefixCorpus()
	in, err := json.Marshal(corpus)
	if err != nil {
		t.Fatal(err)
	}
	var want []struct {
		Path      string
		Resources [3]any
		Model     [3]any
	}
	if err := json.Unmarshal(upstream.Run(t, 2*time.Minute, upstreamPrefixProgram, in), &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(corpus) {
		t.Fatalf("upstream answered %d paths of %d", len(want), len(corpus))
	}
	of := func(v [3]any) stripped { return stripped{OK: v[0].(bool), ID: v[1].(string), Rest: v[2].(string)} }
	counts := map[string]int{}
	for i, target := range corpus {
		for _, side := range []struct {
			name string
			mode server.PrefixMode
			want stripped
		}{
			{"resources", server.PrefixResources, of(want[i].Resources)},
			{"model", server.PrefixModel, of(want[i].Model)},
		} {
			got, path, ok := goStrip(t, side.mode, target)
			if !ok {
				counts["refused by net/http"]++
				continue
			}
			if path != want[i].Path {
				// The two HTTP layers decoded the target differently
				// (invalid UTF-8 after decoding): not the prefix's rule.
				counts["decoded differently"]++
				continue
			}
			counts[fmt.Sprintf("%s accepted=%v", side.name, got.OK)]++
			if got != side.want {
				counts["differ"]++
				if counts["differ"] <= 20 {
					t.Errorf("%s %q (decoded %q): gymlens %v %q %q, upstream %v %q %q", side.name, target, path, got.OK, got.ID, got.Rest, side.want.OK, side.want.ID, side.want.Rest)
				}
			}
		}
	}
	t.Logf("%d targets: %v", len(corpus), counts)
	if counts["resources accepted=true"] == 0 || counts["model accepted=true"] == 0 || counts["resources accepted=false"] == 0 {
		t.Errorf("the corpus does not exercise both outcomes: %v", counts)
	}
	if n := counts["refused by net/http"] + counts["decoded differently"]; n > len(corpus)/10 {
		t.Errorf("%d of %d targets never reached the comparison", n, len(corpus))
	}
}
