package agent_test

import (
	"net/url"
	"testing"

	"github.com/gymlens/gymlens/protocol"
	"github.com/gymlens/gymlens/servers/agent"
)

// TestRolloutEndpointMatchesJoinPath: the concatenated rollout URL is the
// one JoinPath builds, for bases with and without a path, trailing slashes,
// segments JoinPath cleans, escaped paths, credentials, and for a query or
// fragment (where the concatenation is not used).
func TestRolloutEndpointMatchesJoinPath(t *testing.T) {
	bases := []string{
		"http://127.0.0.1:8000", "http://127.0.0.1:8000/", "http://h:1/api", "http://h:1/api/",
		"http://h:1//api/../v1", "http://h:1/a/./b/", "http://h:1/a%2Fb", "http://u:p@h:1/x",
		"http://[::1]:9/", "http://h:1/x?q=1", "http://h:1/x#f", "http://h:1/x?",
	}
	ids := []string{"0-1", "task.7-3-a2", "a..b", "Z_9", "a.", "x-"}
	paths := []string{protocol.PathSeedSession, protocol.PathVerify, protocol.PathResponses}
	concatenated := 0
	for _, b := range bases {
		base, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		root := agent.JoinRoot(base)
		if root != "" {
			concatenated++
		}
		for _, id := range ids {
			if !protocol.ValidRolloutID(id) {
				t.Fatalf("test id %q is not a valid rollout id", id)
			}
			prefix := protocol.RolloutPath(id, "")
			for _, p := range paths {
				want := agent.Endpoint(base, prefix+p)
				if got := agent.RolloutEndpoint(base, root, prefix, p); got != want {
					t.Errorf("base %q, id %q, path %q: got %q, JoinPath gives %q", b, id, p, got, want)
				}
			}
		}
	}
	if concatenated < len(bases)-3 {
		t.Errorf("only %d of %d bases took the concatenation", concatenated, len(bases))
	}
}
