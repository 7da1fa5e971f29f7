// Command wallet serves the wallet environment: a rollout opens a
// wallet, the model moves money with tools, and verify checks the final
// balance.
package main

import (
	"context"
	"net/http"

	"github.com/gymlens/gymlens/environment"
)

// Wallet is one rollout's state.
type Wallet struct {
	Balance int
	Moves   int
}

// Opening is what /seed_session reads from the dataset row.
type Opening struct {
	Balance int `json:"opening_balance" gym:"required"`
}

// Task is what /verify reads from the dataset row.
type Task struct {
	Expected int `json:"expected_balance" gym:"required"`
}

// Amount is the arguments of deposit and withdraw.
type Amount struct {
	Amount int `json:"amount" gym:"required" description:"Whole dollars, above 0."`
}

// Receipt is what deposit, withdraw and balance answer.
type Receipt struct {
	Balance int `json:"balance"`
}

// wallets holds one Wallet per rollout, keyed by the session cookie.
var wallets environment.Sessions[Wallet]

// move adds delta to the rollout's wallet.
func move(ctx context.Context, delta int) (Receipt, error) {
	var r Receipt
	err := wallets.Update(ctx, func(w *Wallet, existed bool) error {
		switch {
		case !existed:
			return environment.Errorf(http.StatusConflict, "no wallet: the rollout was not seeded")
		case w.Balance+delta < 0:
			return environment.Errorf(http.StatusConflict, "insufficient funds")
		}
		w.Balance += delta
		w.Moves++
		r.Balance = w.Balance
		return nil
	})
	return r, err
}

func newWallet() *environment.Environment {
	return environment.New("wallet",
		environment.Verify(func(ctx context.Context, _ *environment.VerifyRequest, task Task) (environment.Score, error) {
			w, ok := wallets.Get(ctx)
			reward := 0.0
			if ok && w.Balance == task.Expected {
				reward = 1
			}
			return environment.Score{Reward: reward}.With("final_balance", w.Balance).With("moves", w.Moves), nil
		}),
		environment.Seed(&wallets, func(_ context.Context, _ *environment.SeedSessionRequest, o Opening) (Wallet, error) {
			return Wallet{Balance: o.Balance}, nil
		}),
		environment.Tool("deposit", "Put money into the wallet.", func(ctx context.Context, a Amount) (Receipt, error) {
			if a.Amount <= 0 {
				return Receipt{}, environment.Errorf(http.StatusBadRequest, "amount must be above 0")
			}
			return move(ctx, a.Amount)
		}),
		environment.Tool("withdraw", "Take money out of the wallet.", func(ctx context.Context, a Amount) (Receipt, error) {
			if a.Amount <= 0 {
				return Receipt{}, environment.Errorf(http.StatusBadRequest, "amount must be above 0")
			}
			return move(ctx, -a.Amount)
		}),
		environment.Tool("balance", "Read the balance.", func(ctx context.Context, _ struct{}) (Receipt, error) {
			w, _ := wallets.Get(ctx)
			return Receipt{Balance: w.Balance}, nil
		}),
	)
}

func main() { environment.Main(newWallet()) }
