package acp

// ReserveAnswer and ReleaseAnswer let the external tests drive a budget.
func ReserveAnswer(b *AnswerBudget, n int64) bool { return b.reserve(n) }
func ReleaseAnswer(b *AnswerBudget, n int64)      { b.release(n) }
