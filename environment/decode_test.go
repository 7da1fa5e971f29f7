package environment_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/gymlens/gymlens/environment"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/protocol"
)

// base is embedded unexported: its exported fields are the task's own,
// as encoding/json promotes them.
type base struct {
	Level int    `json:"level" gym:"required"`
	Shade string `json:"shade"`
}

// layered exercises embedding, shadowing, tags and a plain error from
// Validate.
type layered struct {
	base
	Shade   string `json:"shade" gym:"required"` // shadows base's
	Plain   string // no tag: the field name
	Ignored string `json:"-"`
	Dash    string `json:"-,"` // the member named "-"
}

func (l layered) Validate() error {
	if l.Level < 0 {
		return errors.New("level must not be negative")
	}
	return nil
}

func TestTaskDecoding(t *testing.T) {
	var got layered
	var whole map[string]any
	env := environment.New("decoding", environment.Verify(
		func(_ context.Context, req *protocol.VerifyRequest, task layered) (environment.Score, error) {
			got = task
			return environment.Score{Reward: 1}, nil
		}))
	mapEnv := environment.New("decoding_map", environment.Verify(
		func(_ context.Context, req *protocol.VerifyRequest, task map[string]any) (environment.Score, error) {
			whole = task
			return environment.Score{Reward: 1}, nil
		}))
	b, _ := start(t, env)
	m, _ := start(t, mapEnv)

	body := verifyBody(`"level":3,"shade":"teal","Plain":"p","plain":"lower","Ignored":"x","-":"dash","LEVEL":9`, "x")
	if status, raw := servertest.PostRaw(t, b+"/verify", body); status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	want := layered{base: base{Level: 3}, Shade: "teal", Plain: "p", Dash: "dash"}
	if got != want {
		t.Errorf("decoded %+v, want %+v (exact names, no case folding)", got, want)
	}
	d := post422(t, b+"/verify", verifyBody(`"shade":"teal"`, "x"))
	if len(d) != 1 || loc(d[0]) != "body.level" || d[0].Type != protocol.ErrMissing {
		t.Errorf("missing promoted member: %+v", d)
	}
	d = post422(t, b+"/verify", verifyBody(`"level":-1,"shade":"teal"`, "x"))
	if len(d) != 1 || loc(d[0]) != "body" || d[0].Type != protocol.ErrValue || d[0].Msg != "Value error, level must not be negative" {
		t.Errorf("Validate's plain error: %+v", d)
	}

	if status, raw := servertest.PostRaw(t, m+"/verify", verifyBody(`"a":1,"b":[true]`, "x")); status != http.StatusOK {
		t.Fatalf("%d %s", status, raw)
	}
	if whole["a"] != 1.0 || whole["b"].([]any)[0] != true || len(whole) != 2 {
		t.Errorf("a map task holds %v, want the row's task members a and b", whole)
	}
}
