package builtin

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func isBadRequest(err error) bool { return apierrors.IsBadRequest(err) }
