package replay

import (
	"testing"

	"github.com/timerlane/timerlane/engine"
	"lukechampine.com/uint128"
)

// TestJournalLedgerUndo: taking the log back to a mark restores every
// balance and the burned total as they were there; an operation that
// failed changed nothing and logs nothing.
func TestJournalLedgerUndo(t *testing.T) {
	a, b := engine.Address{0xa}, engine.Address{0xb}
	amt := func(x uint64) engine.Amount { return engine.Amount{Lo: x} }
	l := newJournalLedger()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Credit(a, amt(100)))
	must(l.Burn(amt(7)))
	mark := len(l.log)

	must(l.Debit(a, amt(30)))
	must(l.Credit(b, amt(5)))
	n, _ := l.Account(b)
	must(l.CreditAccount(n, amt(1)))
	must(l.DebitAccount(n, amt(2)))
	must(l.Burn(amt(3)))
	for _, err := range []error{
		l.Debit(b, amt(1000)),                // more than b has
		l.Debit(engine.Address{0xc}, amt(1)), // no account
		l.Credit(a, uint128.Max),             // past 2^128-1
		l.Burn(uint128.Max),                  // past 2^128-1
	} {
		if err == nil {
			t.Fatal("an operation that must fail succeeded")
		}
	}
	if len(l.log) != mark+5 {
		t.Fatalf("%d changes logged after the mark, want 5", len(l.log)-mark)
	}
	if l.Balance(a) != amt(70) || l.Balance(b) != amt(4) || l.Burned() != amt(10) {
		t.Fatalf("before undo: a %s, b %s, burned %s", l.Balance(a), l.Balance(b), l.Burned())
	}
	l.undo(mark)
	if l.Balance(a) != amt(100) || !l.Balance(b).IsZero() || l.Burned() != amt(7) || len(l.log) != mark {
		t.Fatalf("after undo: a %s, b %s, burned %s, %d logged", l.Balance(a), l.Balance(b), l.Burned(), len(l.log))
	}
	l.undo(0)
	if !l.Balance(a).IsZero() || !l.Burned().IsZero() {
		t.Fatalf("after undo to the start: a %s, burned %s", l.Balance(a), l.Burned())
	}
}
