package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress shows the demo's advance on stderr: on a terminal a bar redrawn
// in place at most 10 times a second; elsewhere (CI logs, pipes) a plain
// line every 10%, since carriage returns make a log unreadable.
type progress struct {
	w      io.Writer
	off    bool
	tty    bool
	target uint64 // ops at 100%: every timer scheduled, then fired or cancelled
	start  time.Time
	last   time.Time
	step   int // the next multiple of 10% to print on a plain line
}

func newProgress(w io.Writer, quiet bool, target int) *progress {
	p := &progress{w: w, off: quiet, target: uint64(max(1, target)), start: time.Now(), step: 1}
	if f, ok := w.(*os.File); ok {
		fi, err := f.Stat()
		p.tty = err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	return p
}

// update is called after every block; it decides whether to show anything.
func (p *progress) update(now time.Time, ops, height uint64, scheduled, fired int) {
	if p.off {
		return
	}
	pct := int(min(100, 100*ops/p.target))
	switch {
	case p.tty && now.Sub(p.last) >= 100*time.Millisecond:
		p.last = now
		p.draw(now, pct, ops, height, scheduled, fired)
	case !p.tty && pct >= 10*p.step:
		p.step = pct/10 + 1
		p.draw(now, pct, ops, height, scheduled, fired)
	}
}

// done shows 100% (the run may end below the target when actors are at
// their cap) and ends the bar's line.
func (p *progress) done(ops, height uint64, scheduled, fired int) {
	if p.off || !p.tty && p.step > 10 {
		return
	}
	p.step = 11
	p.draw(time.Now(), 100, ops, height, scheduled, fired)
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

// note prints a line of its own, before the bar has begun.
func (p *progress) note(line string) {
	if !p.off {
		fmt.Fprintln(p.w, line)
	}
}

// abort ends a half-drawn bar's line, so that an error starts on its own.
func (p *progress) abort() {
	if p.tty && !p.off {
		fmt.Fprintln(p.w)
	}
}

func (p *progress) draw(now time.Time, pct int, ops, height uint64, scheduled, fired int) {
	rate := float64(ops) / max(now.Sub(p.start).Seconds(), 1e-3)
	text := fmt.Sprintf("%3d%%  block %s  scheduled %s  fired %s  %s ops/s",
		pct, commas(int(height)), commas(scheduled), commas(fired), si(rate))
	if p.tty {
		const width = 24
		bar := strings.Repeat("#", pct*width/100) + strings.Repeat(".", width-pct*width/100)
		fmt.Fprintf(p.w, "\r[%s] %s\x1b[K", bar, text) // ESC[K clears what a longer line left
		return
	}
	fmt.Fprintf(p.w, "timerlane demo: %s\n", text)
}

// si formats x with a k or M suffix: 1234567 -> 1.2M.
func si(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.1fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.0fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}
