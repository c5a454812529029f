package artifact

import (
	"errors"
	"sync"
)

// Record is one record of a run as producers emit it and sinks receive it: a pointer to one
// of the record types of this package (*Request, *Span, *RequestSent, …; producers
// always emit pointers, so that a sink's type switch names each type once), or a *Raw.
// RecordKind names its event_type and schema_version.
type Record interface {
	RecordKind() Kind
}

// Sink receives a run's records. Producers (the load generator, the span receiver, the
// scrapers, the samplers) call Write, possibly from several goroutines at once; a sink
// serialises what needs it. A Write error means the run cannot go on (the artifact cannot
// be written): records already accepted stay. Close is called once, after the last Write,
// by whoever owns the sink (the run pipeline); producers never call it. It flushes and
// releases what the sink holds and returns the first error the sink met.
//
// Writer (the JSONL artifact), the live exporter and the tables are sinks; a Fanout hands
// each record to all of them.
type Sink interface {
	Write(rec Record) error
	Close() error
}

// Transient is implemented by the records that exist only on their way to live sinks and
// are never part of the artifact: a request's dispatch (RequestSent) and a run's judgement
// (RunJudgement). Writer.Write accepts and skips them.
type Transient interface {
	Record
	transient()
}

// IsTransient reports whether rec is a Transient record.
func IsTransient(rec Record) bool {
	_, ok := rec.(Transient)
	return ok
}

// Fanout is the one place where a run's records split: Write hands each record to every
// sink, in the order the sinks were given (the artifact writer first), and Fanout is itself
// a Sink. Write returns the first sink's error, but every sink still receives the record;
// Close closes each sink once, in order, and joins their errors, where a sink closed
// before (ErrClosed) is not an error. After Close, Write returns ErrClosed.
type Fanout struct {
	sinks []Sink

	mu     sync.RWMutex // write-locked by Close only
	closed bool
}

// NewFanout returns a fan-out over sinks (nil entries are skipped).
func NewFanout(sinks ...Sink) *Fanout {
	f := &Fanout{}
	for _, s := range sinks {
		if s != nil {
			f.sinks = append(f.sinks, s)
		}
	}
	return f
}

// Write hands rec to every sink.
func (f *Fanout) Write(rec Record) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return ErrClosed
	}
	var first error
	for _, s := range f.sinks {
		if err := s.Write(rec); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close closes every sink in order; a second Close returns nil.
func (f *Fanout) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	var errs []error
	for _, s := range f.sinks {
		if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Memory is a Sink that keeps every record in memory, in arrival order (tests, and callers
// that want a run's records without a file). It is safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	records []Record
	closed  bool
}

// Write appends rec; after Close it returns ErrClosed.
func (m *Memory) Write(rec Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.records = append(m.records, rec)
	return nil
}

// Close marks the sink closed.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

// Records returns a copy of the records written so far.
func (m *Memory) Records() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Record(nil), m.records...)
}

// SinkFunc adapts a function to a Sink; its Close does nothing.
type SinkFunc func(rec Record) error

// Write calls f.
func (f SinkFunc) Write(rec Record) error { return f(rec) }

// Close returns nil.
func (SinkFunc) Close() error { return nil }
