package answer

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/acpgate/acpgate/internal/acp/translate"
)

// step is one thing that reaches an accumulator: a chunk, or a split.
type step struct {
	chunk translate.Chunk
	split bool
}

func accumulate(limit int, steps []step) (a Accumulator) {
	a.limit = limit
	for _, s := range steps {
		if s.split {
			a.Split()
			continue
		}
		a.Add(s.chunk)
	}
	return a
}

// randomSteps is a turn's updates: chunks of 0–9 bytes (some non-text,
// some multi-byte), message ids that change now and then, and splits.
func randomSteps(r *rand.Rand) []step {
	words := []string{"", "a", "bc", "déf", "€€", "ghijklmno", "\n\n"}
	ids := []string{"", "m1", "m2"}
	var steps []step
	id := ids[r.IntN(len(ids))]
	for range r.IntN(40) {
		switch r.IntN(10) {
		case 0:
			steps = append(steps, step{split: true})
		case 1:
			id = ids[r.IntN(len(ids))]
		case 2:
			steps = append(steps, step{chunk: translate.Chunk{MessageID: id, Text: "image", IsText: false}})
		default:
			steps = append(steps, step{chunk: translate.Chunk{MessageID: id, Text: words[r.IntN(len(words))], IsText: true}})
		}
	}
	return steps
}

// boundMidway adds steps to a, bounding it (Bound, then bound) before
// step at, or after the last when at is len(steps).
func boundMidway(a *Accumulator, steps []step, at int, bound func()) {
	for j := range len(steps) + 1 {
		if j == at {
			a.Bound()
			bound()
		}
		if j == len(steps) {
			return
		}
		if steps[j].split {
			a.Split()
		} else {
			a.Add(steps[j].chunk)
		}
	}
}

func TestALimitedAccumulatorKeepsABeginningAtLeastTheLimitLongAndCountsTheRest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		steps := randomSteps(r)
		limit := 1 + r.IntN(30)
		wholeAcc, limitedAcc := accumulate(0, steps), accumulate(limit, steps)
		whole, wholeFinal := wholeAcc.Finish()
		text, final := limitedAcc.Finish()
		if !whole.Whole() || !wholeFinal.Whole() {
			t.Fatalf("case %d: without a limit the text is not whole: %+v %+v", i, whole, wholeFinal)
		}
		if text.Len() != whole.Len() || final.Len() != wholeFinal.Len() {
			t.Fatalf("case %d, limit %d: lengths %d/%d, want %d/%d", i, limit, text.Len(), final.Len(), whole.Len(), wholeFinal.Len())
		}
		if !strings.HasPrefix(whole.Kept, text.Kept) || len(text.Kept) < min(limit, whole.Len()) {
			t.Fatalf("case %d, limit %d: kept %q of %q", i, limit, text.Kept, whole.Kept)
		}
		if text.Whole() && (text.Kept != whole.Kept || final.Kept != wholeFinal.Kept) {
			t.Fatalf("case %d, limit %d: kept whole, but %q/%q, want %q/%q", i, limit, text.Kept, final.Kept, whole.Kept, wholeFinal.Kept)
		}
		if !text.Whole() && final.Kept != "" {
			t.Fatalf("case %d: a final message %q from a text not kept whole", i, final.Kept)
		}
	}
}

func TestAnAccumulatorWithoutALimitKeepsEverything(t *testing.T) {
	a := accumulate(0, []step{
		{chunk: translate.Chunk{MessageID: "a", Text: "one ", IsText: true}},
		{chunk: translate.Chunk{MessageID: "a", Text: "message", IsText: true}},
		{chunk: translate.Chunk{MessageID: "b", Text: "", IsText: true}},
		{split: true},
		{chunk: translate.Chunk{MessageID: "", Text: "two", IsText: true}},
	})
	text, final := a.Finish()
	if text.Kept != "one message\n\ntwo" || !text.Whole() || final.Kept != "two" || !final.Whole() {
		t.Errorf("text %+v final %+v", text, final)
	}
}

func TestAnAccumulatorBoundMidwayEndsExactlyAsOneLimitedFromTheStart(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20000 {
		steps := randomSteps(r)
		keep := 1 + r.IntN(30)
		at := r.IntN(len(steps) + 1)
		budget := NewBudget(1 << 30)
		switched := Accumulator{keep: keep, budget: budget}
		boundMidway(&switched, steps, at, func() {
			if budget.Used() != 0 {
				t.Fatalf("case %d: %d bytes still reserved once bound", i, budget.Used())
			}
		})
		limitedAcc := accumulate(keep, steps)
		text, final := switched.Finish()
		wantText, wantFinal := limitedAcc.Finish()
		if !reflect.DeepEqual(text, wantText) || !reflect.DeepEqual(final, wantFinal) {
			t.Fatalf("case %d, bound at step %d of %d, keep %d: %+v %+v, want %+v %+v", i, at, len(steps), keep, text, final, wantText, wantFinal)
		}
		if budget.Used() != 0 {
			t.Fatalf("case %d: %d bytes still reserved after finish", i, budget.Used())
		}
	}
}

func TestAnAccumulatorOverItsBudgetKeepsOnlyItsLimitAndReturnsTheReservation(t *testing.T) {
	budget := NewBudget(2 * reserveStep)
	a := Accumulator{keep: 10, budget: budget}
	chunk := translate.Chunk{MessageID: "m", Text: strings.Repeat("x", reserveStep/2), IsText: true}
	for range 4 {
		a.Add(chunk)
	}
	if a.overBudget || budget.Used() != 2*reserveStep {
		t.Fatalf("within the budget: over %v, %d reserved", a.overBudget, budget.Used())
	}
	a.Add(chunk)
	if !a.overBudget || budget.Used() != 0 || len(a.current.parts) != 1 || !a.current.cut {
		t.Fatalf("over the budget: over %v, %d reserved, %d chunks kept", a.overBudget, budget.Used(), len(a.current.parts))
	}
	text, final := a.Finish()
	if text.Len() != 5*len(chunk.Text) || text.Whole() || final.Len() != 5*len(chunk.Text) || final.Kept != "" {
		t.Errorf("text %d of %d bytes, final %d of %d", len(text.Kept), text.Len(), len(final.Kept), final.Len())
	}
}

func TestALongWholeAnswerComesAsItsChunksAndItsFinalMessageAsTheirTail(t *testing.T) {
	long := strings.Repeat("y", PiecesFrom/2)
	var a Accumulator
	for _, c := range []translate.Chunk{{MessageID: "a", Text: "first", IsText: true}, {MessageID: "b", Text: long, IsText: true}, {MessageID: "b", Text: long, IsText: true}} {
		a.Add(c)
	}
	text, final := a.Finish()
	if text.Kept != "" || final.Kept != "" {
		t.Fatalf("a %d-byte answer was joined; want it in pieces", text.Len())
	}
	if !reflect.DeepEqual(text.Pieces, []string{"first\n\n", long, long}) || !reflect.DeepEqual(final.Pieces, []string{long, long}) {
		t.Fatalf("text in %d pieces, final message in %d; want the short chunk joined with the separator, then the last message's chunks", len(text.Pieces), len(final.Pieces))
	}
	if unsafe.StringData(text.Pieces[1]) != unsafe.StringData(long) || !text.Whole() || text.Len() != 5+2+2*len(long) || final.Len() != 2*len(long) {
		t.Errorf("pieces copied, or the lengths are wrong: text %d bytes (whole %v), final %d", text.Len(), text.Whole(), final.Len())
	}
	// One byte short of the bound, the answer is joined as before.
	var short Accumulator
	short.Add(translate.Chunk{Text: strings.Repeat("z", PiecesFrom-1), IsText: true})
	if text, _ := short.Finish(); text.Pieces != nil || len(text.Kept) != PiecesFrom-1 {
		t.Errorf("a %d-byte answer came in %d pieces; want one string", PiecesFrom-1, len(text.Pieces))
	}
}

func TestAnAccumulatorBoundMidwayInLongRunsEndsExactlyAsOneLimitedFromTheStart(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	words := []string{strings.Repeat("a", 1), strings.Repeat("b", 700), strings.Repeat("c", 3000), strings.Repeat("d", ownPiece), strings.Repeat("e", ownPiece+1)}
	for i := range 300 {
		var steps []step
		for range 50 + r.IntN(150) {
			if r.IntN(40) == 0 {
				steps = append(steps, step{split: true})
				continue
			}
			steps = append(steps, step{chunk: translate.Chunk{MessageID: "m", Text: words[r.IntN(len(words))], IsText: true}})
		}
		keep := 1 + r.IntN(3*runBytes)
		at := r.IntN(len(steps) + 1)
		switched := Accumulator{keep: keep, budget: NewBudget(1 << 30)}
		boundMidway(&switched, steps, at, func() {})
		limitedAcc := accumulate(keep, steps)
		text, final := switched.Finish()
		wantText, wantFinal := limitedAcc.Finish()
		if !reflect.DeepEqual(text, wantText) || !reflect.DeepEqual(final, wantFinal) {
			t.Fatalf("case %d, bound at step %d of %d, keep %d: kept %d of %d bytes, want %d of %d", i, at, len(steps), keep, len(text.Kept), text.Len(), len(wantText.Kept), wantText.Len())
		}
	}
}

func TestALongAnswerOfShortChunksComesAsFewPiecesThatJoinToIt(t *testing.T) {
	var a Accumulator
	var want strings.Builder
	for i := range PiecesFrom / 64 * 2 {
		id := "a"
		if i >= PiecesFrom/64 {
			id = "b"
		}
		if i == PiecesFrom/64 {
			want.WriteString("\n\n")
		}
		chunk := fmt.Sprintf("%063d ", i)[:64]
		want.WriteString(chunk)
		a.Add(translate.Chunk{MessageID: id, Text: chunk, IsText: true})
	}
	text, final := a.Finish()
	// Each message's chunks come as runs of runBytes, and the separator
	// joins the first message's last run.
	if got := strings.Join(text.Pieces, ""); got != want.String() || len(text.Pieces) > want.Len()/runBytes+2 {
		t.Fatalf("%d pieces joining to %d bytes; want at most %d (runs of short chunks) joining to the %d bytes of the answer", len(text.Pieces), len(got), want.Len()/runBytes+2, want.Len())
	}
	for i, p := range text.Pieces {
		if len(p) > runBytes+len(messageSeparator) {
			t.Fatalf("piece %d is %d bytes, past a run's %d", i, len(p), runBytes)
		}
	}
	if f := strings.Join(final.Pieces, ""); f != want.String()[PiecesFrom+2:] {
		t.Errorf("the final message is %d bytes, not the second message", len(f))
	}
}
