package report

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// FmtInt is x rounded to an integer with thousands separated by commas;
// "—" for NaN (nothing measured).
func FmtInt(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	s := fmt.Sprintf("%d", int64(math.Round(x)))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// FmtDur is a duration in ns with a unit and precision that suit its
// size (µs, ms, s).
func FmtDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d == math.MinInt64:
		return "—"
	case d < 0:
		return "-" + FmtDur(-ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// FmtDurF is FmtDur of a float (a median, a difference); "—" for NaN.
func FmtDurF(ns float64) string {
	if math.IsNaN(ns) {
		return "—"
	}
	return FmtDur(int64(ns))
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

func fmt1(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.1f", x)
}

// MiB is b bytes in MiB, to a tenth.
func MiB(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// KiB is b bytes in whole KiB.
func KiB(b int64) string { return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10)) }

func size(b int) string {
	if b >= 1<<10 && b%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

func fmtUs(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	if x < 10 {
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

func shortErr(s string) string {
	s = strings.ReplaceAll(s, "`", "'")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// fmtSigned is a duration with its sign: an added latency may be negative.
func fmtSigned(ns int64) string {
	if ns < 0 {
		return FmtDur(ns)
	}
	return "+" + FmtDur(ns)
}
