package client

import (
	"context"
	"testing"
	"time"
)

// A drain timer that has fired is never reused: disarmDrain drops it with its own call's
// cancel, so a late fire cannot cancel the next call of the pooled stream; one that Stop
// caught is kept and re-armed with the new call's cancel.
func TestDrainTimerFiredIsDropped(t *testing.T) {
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	d := &drainTimer{cancel: cancel1}
	d.t = time.AfterFunc(0, d.fire)
	s := &stream{drain: d, drainArmed: true}
	select {
	case <-ctx1.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the timer did not fire")
	}
	s.disarmDrain()
	if s.drain != nil || s.drainArmed {
		t.Fatalf("fired timer kept: %+v armed %v", s.drain, s.drainArmed)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	s.armDrain(cancel2)
	if s.drain == nil || s.drain == d {
		t.Fatal("a fired timer was re-armed")
	}
	d.fire() // the old timer firing again reaches only the first call
	if ctx2.Err() != nil {
		t.Fatal("the old timer cancelled the next call")
	}
	kept := s.drain
	s.disarmDrain() // Stop catches it: kept, with no cancel
	if s.drain != kept || kept.cancel != nil {
		t.Fatalf("stopped timer: kept %v cancel %v", s.drain == kept, kept.cancel != nil)
	}
	s.armDrain(cancel2)
	if s.drain != kept || !s.drainArmed {
		t.Fatal("a stopped timer was not reused")
	}
	s.disarmDrain()
}
