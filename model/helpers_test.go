package model_test

import (
	"github.com/threadline/threadline/model/internal/modeltest"
)

// The helpers every model test shares (model/internal/modeltest).
var (
	userReq    = modeltest.UserReq
	streamText = modeltest.StreamText
	collect    = modeltest.Collect
)
