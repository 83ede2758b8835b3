package commands

import "errors"

// Exit codes of devctl run and devctl logs; every other failure exits 1.
const (
	// ExitFailed: the job failed (or devctl could not do its work).
	ExitFailed = 1
	// ExitUsage: bad flags or arguments, a file that cannot be read or converted, or a job the
	// apiserver refuses. Nothing was created.
	ExitUsage = 2
	// ExitTimeout: --timeout passed before the job ended (as timeout(1) exits).
	ExitTimeout = 124
	// ExitInterrupted: Ctrl-C stopped following; the job goes on (128 + SIGINT).
	ExitInterrupted = 130
)

// ExitError ends devctl with Code; main prints Err, when there is one, once.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageError is an error that exits ExitUsage.
func UsageError(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// ExitCode is the code devctl exits with for err: 0 for nil, the ExitError's code, else 1.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitFailed
}
