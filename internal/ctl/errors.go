package ctl

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ExitError ends the command with Code after printing Msg (if any) to standard error.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// Exit converts err into the message and status kubectl would print: API errors as
// "Error from server (Reason): message", others as "error: message"; an *ExitError as is.
func Exit(err error) *ExitError {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		if s.Reason != "" {
			return &ExitError{Code: 1, Msg: fmt.Sprintf("Error from server (%s): %s", s.Reason, s.Message)}
		}
		return &ExitError{Code: 1, Msg: "Error from server: " + s.Message}
	}
	return &ExitError{Code: 1, Msg: "error: " + err.Error()}
}
