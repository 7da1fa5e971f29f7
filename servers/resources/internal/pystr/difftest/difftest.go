// Package difftest runs the differential tests of the ported verifiers:
// the same verify bodies are scored by upstream's Python verifier, in one
// process through upstream.Run, and by the gymlens environment over real
// HTTP on loopback, and the two verdicts are compared case by case.
//
// It is test support: only the ported verifiers' tests import it.
package difftest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gymlens/gymlens/internal/upstream"
)

// Body is a JSON verify body.
type Body = json.RawMessage

// Case is one verify request: the server configuration it is scored
// under (the keys of upstream's server config class that scoring reads,
// {} for the defaults) and the JSON body POSTed to /verify.
type Case struct {
	Config map[string]any  `json:"config"`
	Body   json.RawMessage `json:"body"`
}

// Upstream statuses.
const (
	// StatusOK: upstream scored the body.
	StatusOK = "ok"
	// StatusInvalid: upstream's request model refused the body (FastAPI
	// answers 422).
	StatusInvalid = "invalid"
	// StatusCrash: upstream's verify raised (FastAPI answers 500).
	StatusCrash = "crash"
)

// Verdict is upstream's outcome for one case.
type Verdict struct {
	// Status is StatusOK, StatusInvalid or StatusCrash.
	Status string `json:"status"`
	// Exception is the type name of what upstream raised (StatusCrash),
	// or the validation error (StatusInvalid).
	Exception string `json:"exception,omitempty"`
	// Fields holds the reward and the other members the harness was
	// asked for, as upstream's response dumps them to JSON.
	Fields map[string]json.RawMessage `json:"fields,omitempty"`
}

// harness reads one Case per line and prints one Verdict per line. Its
// arguments: the verifier's module, server class and request class,
// then the response members to report besides reward.
const harness = `
import asyncio, importlib, json, sys
from pydantic import TypeAdapter, ValidationError

mod = importlib.import_module(sys.argv[1])
server_cls = getattr(mod, sys.argv[2])
request_cls = getattr(mod, sys.argv[3])
wanted = sys.argv[4:]
config_cls = server_cls.model_fields["config"].annotation
loop = asyncio.new_event_loop()
servers = {}

def server_for(config):
    key = json.dumps(config, sort_keys=True)
    if key not in servers:
        values = {k: TypeAdapter(config_cls.model_fields[k].annotation).validate_python(v) for k, v in config.items()}
        servers[key] = server_cls.model_construct(config=config_cls.model_construct(**values))
    return servers[key]

out = sys.stdout
for line in sys.stdin:
    case = json.loads(line)
    try:
        body = request_cls.model_validate(case["body"])
    except ValidationError as e:
        verdict = {"status": "invalid", "exception": str(e)[:400]}
    else:
        try:
            resp = loop.run_until_complete(server_for(case["config"]).verify(body))
        except Exception as e:
            verdict = {"status": "crash", "exception": type(e).__name__}
        else:
            dumped = resp.model_dump(mode="json")
            verdict = {"status": "ok", "fields": {k: dumped.get(k) for k in ["reward", *wanted]}}
    out.write(json.dumps(verdict) + "\n")
`

// Upstream scores cases with upstream's verifier: module is its Python
// module (resources_servers.mcqa.app), server and request its server and
// verify request classes, fields the response members to report besides
// "reward". It returns one Verdict per case, in order.
func Upstream(t testing.TB, module, server, request string, fields []string, cases []Case) []Verdict {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	enc.SetEscapeHTML(false)
	for _, c := range cases {
		if c.Config == nil {
			c.Config = map[string]any{}
		}
		if err := enc.Encode(c); err != nil {
			t.Fatalf("difftest: encode case: %v", err)
		}
	}
	args := append([]string{module, server, request}, fields...)
	start := time.Now()
	out := upstream.Run(t, 5*time.Minute, harness, in.Bytes(), args...)
	t.Logf("upstream scored %d cases in %v", len(cases), time.Since(start).Round(time.Millisecond))
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("difftest: upstream answered %d lines for %d cases", len(lines), len(cases))
	}
	verdicts := make([]Verdict, len(cases))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &verdicts[i]); err != nil {
			t.Fatalf("difftest: upstream line %d: %v: %s", i, err, l)
		}
	}
	return verdicts
}

// Answer is gymlens's HTTP answer to one case.
type Answer struct {
	Status int
	Body   []byte
}

// Post sends every body to POST base/verify, a few at a time over
// keep-alive connections, and returns the answers in order.
func Post(t testing.TB, base string, bodies []Body) []Answer {
	t.Helper()
	return Start(t, base, bodies)()
}

// Start is Post in the background, so that upstream can score the same
// cases meanwhile: it starts sending and returns a function that waits
// for the answers. Call that function from the test's goroutine.
func Start(t testing.TB, base string, bodies []Body) func() []Answer {
	start := time.Now()
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	answers := make([]Answer, len(bodies))
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				answers[i], errs[i] = post(client, base+"/verify", bodies[i])
			}
		})
	}
	wg.Go(func() {
		for i := range bodies {
			next <- i
		}
		close(next)
	})
	return func() []Answer {
		t.Helper()
		wg.Wait()
		tr.CloseIdleConnections()
		t.Logf("gymlens scored %d cases in %v", len(bodies), time.Since(start).Round(time.Millisecond))
		for i, err := range errs {
			if err != nil {
				t.Fatalf("difftest: case %d: %v", i, err)
			}
		}
		return answers
	}
}

func post(client *http.Client, url string, body []byte) (Answer, error) {
	res, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return Answer{}, fmt.Errorf("POST %s: %w", url, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return Answer{}, fmt.Errorf("POST %s: reading the answer: %w", url, err)
	}
	return Answer{Status: res.StatusCode, Body: raw}, nil
}

// Tally counts the outcome of a comparison.
type Tally struct {
	// Cases is the number of cases compared or excluded.
	Cases int
	// Agree is the number of cases on which both sides gave the same
	// verdict (both refused the body, or both scored it alike).
	Agree int
	// Refused is how many of the agreeing cases both sides refused.
	Refused int
	// Crashes counts the cases excluded because upstream raised, by
	// the type of what it raised.
	Crashes map[string]int
	// Rewards counts the agreeing scored cases by reward.
	Rewards map[float64]int
	// Disagreements describes the first cases that disagree.
	Disagreements []string
}

// Crashed is the number of excluded cases.
func (t Tally) Crashed() int {
	n := 0
	for _, c := range t.Crashes {
		n += c
	}
	return n
}

// CrashSummary lists the excluded cases by exception type.
func (t Tally) CrashSummary() string {
	keys := make([]string, 0, len(t.Crashes))
	for k := range t.Crashes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, t.Crashes[k])
	}
	return strings.Join(parts, ", ")
}

// maxShown bounds the disagreements Compare describes.
const maxShown = 15

// Compare sets gymlens's answers against upstream's verdicts. A case
// agrees when upstream refused the body and gymlens answered 422, or
// when upstream scored it and gymlens answered 200 with the same reward
// (within 1e-9) and the same JSON value for every other reported
// member. A case on which upstream crashed with an exception listed in
// excluded is left out of the comparison and counted, provided gymlens
// scored it (200); any other crash is a disagreement.
func Compare(cases []Case, verdicts []Verdict, answers []Answer, excluded ...string) Tally {
	tally := Tally{Cases: len(cases), Crashes: map[string]int{}, Rewards: map[float64]int{}}
	for i := range cases {
		v, a := verdicts[i], answers[i]
		why := ""
		switch v.Status {
		case StatusInvalid:
			if a.Status == http.StatusUnprocessableEntity {
				tally.Agree++
				tally.Refused++
				continue
			}
			why = "upstream refused the body: " + v.Exception
		case StatusCrash:
			if contains(excluded, v.Exception) && a.Status == http.StatusOK {
				tally.Crashes[v.Exception]++
				continue
			}
			why = "upstream raised " + v.Exception
		case StatusOK:
			why = sameFields(v.Fields, a)
			if why == "" {
				tally.Agree++
				var r float64
				_ = json.Unmarshal(v.Fields["reward"], &r)
				tally.Rewards[r]++
				continue
			}
		default:
			why = "unknown upstream status " + v.Status
		}
		if len(tally.Disagreements) < maxShown {
			tally.Disagreements = append(tally.Disagreements, fmt.Sprintf("case %d: %s\n  config %v\n  body %s\n  gymlens %d %s",
				i, why, cases[i].Config, clip(cases[i].Body), a.Status, clip(a.Body)))
		}
	}
	return tally
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sameFields explains how gymlens's answer a differs from upstream's
// fields, or returns "".
func sameFields(want map[string]json.RawMessage, a Answer) string {
	if a.Status != http.StatusOK {
		return fmt.Sprintf("upstream scored %s", fieldsString(want))
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(a.Body, &got); err != nil {
		return "gymlens answered no JSON object: " + err.Error()
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			return fmt.Sprintf("gymlens has no %q; upstream %s", k, fieldsString(want))
		}
		if k == "reward" || k == "equivalence_score" {
			var wf, gf float64
			if json.Unmarshal(w, &wf) != nil || json.Unmarshal(g, &gf) != nil || math.Abs(wf-gf) > 1e-9 {
				return fmt.Sprintf("%s %s, upstream %s", k, g, fieldsString(want))
			}
			continue
		}
		if !jsonEqual(w, g) {
			return fmt.Sprintf("%s %s, upstream %s", k, g, fieldsString(want))
		}
	}
	return ""
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

func fieldsString(f map[string]json.RawMessage) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + string(f[k])
	}
	return strings.Join(parts, " ")
}

func clip(b []byte) string {
	const n = 1500
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// Report fails t with the disagreements of tally and logs its counts as
// "N cases, N agree" with the refused and excluded cases.
func Report(t testing.TB, name string, tally Tally) {
	t.Helper()
	t.Logf("%s: %d cases, %d agree (%d refused by both); %d excluded as upstream crashes (%s); rewards of the scored: %s",
		name, tally.Cases, tally.Agree, tally.Refused, tally.Crashed(), tally.CrashSummary(), rewardSummary(tally.Rewards))
	if n := tally.Cases - tally.Agree - tally.Crashed(); n > 0 {
		t.Errorf("%s: %d cases disagree; the first:\n%s", name, n, strings.Join(tally.Disagreements, "\n"))
	}
}

// rewardSummary lists reward counts, at most eight, the most frequent
// first.
func rewardSummary(rewards map[float64]int) string {
	keys := make([]float64, 0, len(rewards))
	for k := range rewards {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if rewards[keys[i]] != rewards[keys[j]] {
			return rewards[keys[i]] > rewards[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, 9)
	for i, k := range keys {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("%d other values", len(keys)-8))
			break
		}
		parts = append(parts, fmt.Sprintf("%g x%d", k, rewards[k]))
	}
	return strings.Join(parts, ", ")
}
