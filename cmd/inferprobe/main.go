// Command inferprobe measures LLM inference servers: it generates load against an
// OpenAI-compatible Chat Completions endpoint, records every request in a JSONL artifact,
// and joins the server's own telemetry to it. See the README for the verbs.
//
// Exit codes (all verbs): 0 ok, 1 unexpected, 2 unusable setting (checked before anything
// is sent or written), 3 findings (e.g. no measured request succeeded), 4 client-limited
// (profile's self-audit), 5 unreadable or invalid input file, 130 interrupted.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/inferprobe/inferprobe/artifact"
)

// Exit codes shared by every verb: 0 ok, 1 unexpected, 2 an unusable setting (found before
// anything is sent or written), 3 findings, 4 client-limited (profile's self-audit), 5 an
// unreadable or invalid input file, 130 interrupted.
const (
	exitOK         = 0
	exitUnexpected = 1
	exitUsage      = 2
	exitFindings   = 3
	// exitClientLimited: profile's self-audit found a case whose numbers the load generator,
	// not the server, shaped (unless --allow-client-limited).
	exitClientLimited = 4
	exitBadInput      = 5
	exitInterrupted   = 130
)

// exitError carries a process exit code through cobra's error return.
type exitError struct {
	code int
	err  error // nil: exit silently with code
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErrorf returns an exit-2 error: an unusable setting.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// checkNumber is the usage error of a number flag whose value breaks rule (the one
// artifact.Range every number setting is checked with), e.g. "--interval must be at least
// 0.001 seconds (1 ms), not 0"; nil when v lies in it.
func checkNumber(flag string, v float64, rule artifact.Range) error {
	if err := rule.Check(v); err != nil {
		return usageErrorf("--%s %v", flag, err)
	}
	return nil
}

// withCode wraps err so that the process exits with code.
func withCode(code int, err error) error {
	return &exitError{code: code, err: err}
}

func main() {
	os.Exit(execute(os.Args[1:]))
}

// rawArgsKey is the context key of the command line as given (execute's args), for the
// messages that depend on where an argument stood (noArgsOptionalValueHint).
type rawArgsKey struct{}

// execute runs the command line args and returns the process exit code.
func execute(args []string) int {
	var prof pprofFlags
	root := newRootCmdProfiled(&prof)
	root.SetArgs(args)
	err := root.ExecuteContext(context.WithValue(context.Background(), rawArgsKey{}, args))
	prof.stop()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(os.Stderr, "Error: %v\n", ee.err)
		}
		return ee.code
	}
	// cobra's own flag-parsing errors are usage errors.
	fmt.Fprintf(os.Stderr, "Error: %v\n", err)
	return exitUsage
}
