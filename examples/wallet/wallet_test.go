package main

import (
	"testing"

	"github.com/gymlens/gymlens/environment/envtest"
)

func TestWalletRollout(t *testing.T) {
	base := envtest.Serve(t, newWallet())
	s := envtest.NewSession(t, base)
	row := envtest.Row("Deposit 5, withdraw 3, then tell me the balance.",
		map[string]any{"opening_balance": 10, "expected_balance": 12})

	s.Post("/seed_session", row)
	s.Post("/deposit", `{"amount": 5}`)
	s.Post("/withdraw", `{"amount": 3}`)
	status, body := s.Post("/verify", envtest.Verify(row, envtest.Answer("Your balance is 12.")))
	if m := envtest.Members(t, body); status != 200 || string(m["reward"]) != "1" {
		t.Fatalf("verify: %d %s", status, body)
	}
}
