package aggstream_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gymlens/gymlens/internal/aggstream"
	"github.com/gymlens/gymlens/server"
)

// each runs Each over body read one byte at a time (every element split
// across reads), and returns the elements it gave.
func each(t *testing.T, body string, check bool) ([]string, error) {
	t.Helper()
	var got []string
	err := aggstream.Each(iotest.OneByteReader(strings.NewReader(body)), check, func(elem []byte) error {
		got = append(got, string(elem))
		return nil
	})
	return got, err
}

func TestEachStreamedShape(t *testing.T) {
	long := `{"a":"` + strings.Repeat(`x\"}]`, 50_000) + `"}`
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`{"verify_responses":[]}`, nil},
		{`{"verify_responses":[{}]}`, []string{`{}`}},
		{` { "verify_responses" : [ {"a":1} , {"b":[1,{"c":"]}"}]} ] } ` + "\n", []string{`{"a":1}`, `{"b":[1,{"c":"]}"}]}`}},
		{aggstream.Open + `{"r":1},` + long + aggstream.Close, []string{`{"r":1}`, long}},
		{`{"verify_responses":[{"r":2}],"other":{"a":[1,"]"]},"n":123, "t":true }`, []string{`{"r":2}`}},
	} {
		got, err := each(t, tc.body, true)
		if err != nil {
			t.Fatalf("Each(%.60q): %v", tc.body, err)
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("Each(%.60q) gave %.80q, want %.80q", tc.body, got, tc.want)
		}
	}
}

func TestEachOtherShapes(t *testing.T) {
	for _, body := range []string{
		``,
		`[]`,
		`{"verify_responses":null}`,
		`{"other":1,"verify_responses":[]}`,
		`{"verify_responses":[],"verify_responses":[{}]}`,
		`{"verify_responses":[],"verify\u005fresponses":[{}]}`,
		`{"verify_responses":[],"other":tru}`,
		`{"verify_responses":[],"other"}`,
		`{"verify_responses":[1]}`,
		`{"verify_responses":[{"a":1} {"b":2}]}`,
		`{"verify_responses":[{"a":1}`,
		`{"verify_responses":[{"a":tru}]}`,
		`{"verify_responses":[]} x`,
		`{"verify\u005fresponses":[]}`,
	} {
		if _, err := each(t, body, true); !errors.Is(err, server.ErrNotStreamed) {
			t.Errorf("Each(%q) = %v, want ErrNotStreamed", body, err)
		}
	}
	// Unchecked, an invalid element is the caller's to find.
	got, err := each(t, `{"verify_responses":[{"a":tru}]}`, false)
	if err != nil || len(got) != 1 {
		t.Errorf("Each unchecked = %q, %v; want the element", got, err)
	}
}

func TestEachErrors(t *testing.T) {
	stop := errors.New("stop")
	err := aggstream.Each(strings.NewReader(`{"verify_responses":[{},{}]}`), true, func([]byte) error { return stop })
	if !errors.Is(err, stop) || errors.Is(err, server.ErrNotStreamed) {
		t.Errorf("Each with a failing fn = %v, want its error", err)
	}
	broken := io.MultiReader(strings.NewReader(`{"verify_responses":[{}`), iotest.ErrReader(io.ErrClosedPipe))
	if err := aggstream.Each(broken, true, func([]byte) error { return nil }); !errors.Is(err, server.ErrNotStreamed) || !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Each over a failed read = %v, want ErrNotStreamed and the read's error", err)
	}
}
