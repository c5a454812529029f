package main

import (
	"sync/atomic"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// noRunFeed is the sink of the norun consumer: the daemon's span feed (daemon.spanFeed) with
// no run attached. Write routes each span with a join.Router that holds no run and counts it
// unrouted, as the daemon does; WantsSpans reports false and SkipSpans counts n spans
// unrouted (the receiver's SpanFilter: a receiver that knows it accepts valid exports without
// decoding them; one that does not calls Write for every span).
type noRunFeed struct {
	router   join.Router
	unrouted atomic.Int64
}

func (f *noRunFeed) Write(rec artifact.Record) error {
	span, ok := rec.(*artifact.Span)
	if !ok {
		return nil
	}
	if _, ok := f.router.Route(span); !ok {
		f.unrouted.Add(1)
	}
	return nil
}

func (f *noRunFeed) Close() error { return nil }

// WantsSpans is false: no run is attached.
func (f *noRunFeed) WantsSpans() bool { return false }

// SkipSpans counts n spans unrouted.
func (f *noRunFeed) SkipSpans(n int) { f.unrouted.Add(int64(n)) }
