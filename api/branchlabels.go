package api

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/threadline/threadline/checkpoint/errcode"
)

// branchLabelsKey is where the web app keeps the names people give
// branches, in a thread's metadata: an object from the id of a branch's
// first message (immutable, so a key never goes stale) to its name.
const branchLabelsKey = "branch_labels"

// maxBranchLabel is the most characters a branch name may have.
const maxBranchLabel = 80

// branchLabelIDs checks the shape of metadata.branch_labels, when present:
// an object whose keys are UUIDs and whose values are names of 1 to
// maxBranchLabel characters, not blank. It returns the keys, or an
// errcode.Invalid error naming what is wrong.
func branchLabelIDs(metadata map[string]any) ([]uuid.UUID, error) {
	raw, ok := metadata[branchLabelsKey]
	if !ok {
		return nil, nil
	}
	labels, ok := raw.(map[string]any)
	if !ok {
		return nil, errcode.New(errcode.Invalid, "metadata.%s must be an object from message ids to names", branchLabelsKey)
	}
	ids := make([]uuid.UUID, 0, len(labels))
	for k, v := range labels {
		id, err := uuid.Parse(k)
		if err != nil || len(k) != 36 {
			return nil, errcode.New(errcode.Invalid, "metadata.%s: key %q is not a message id", branchLabelsKey, k)
		}
		name, ok := v.(string)
		if !ok || strings.TrimSpace(name) == "" {
			return nil, errcode.New(errcode.Invalid, "metadata.%s[%s] must be a name that is not blank", branchLabelsKey, k)
		}
		if n := utf8.RuneCountInString(name); n > maxBranchLabel {
			return nil, errcode.New(errcode.Invalid, "metadata.%s[%s] is %d characters; at most %d", branchLabelsKey, k, n, maxBranchLabel)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// checkBranchLabels validates metadata.branch_labels of thread id: its
// shape (branchLabelIDs), and that every key is the id of a message of
// that thread. It returns errcode.Invalid for bad labels and the
// snapshot's error (errcode.NotFound for a thread the caller cannot see).
func (s *Server) checkBranchLabels(ctx context.Context, who string, id uuid.UUID, metadata map[string]any) error {
	ids, err := branchLabelIDs(metadata)
	if err != nil || len(ids) == 0 {
		return err
	}
	snap, err := s.svc.Snapshot(ctx, who, id)
	if err != nil {
		return err
	}
	tree := snap.View()
	for _, m := range ids {
		// A message id is its turn's first checkpoint.
		if tree.Get(m) == nil || tree.WireID(m) != m {
			return errcode.New(errcode.Invalid, "metadata.%s: %s is not a message of this thread", branchLabelsKey, m)
		}
	}
	return nil
}
