package thread

// PendingStarts is how many starts wait for the starter's next write.
func PendingStarts(s *Service) int {
	s.starts.mu.Lock()
	defer s.starts.mu.Unlock()
	return len(s.starts.pending)
}
