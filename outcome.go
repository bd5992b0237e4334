package idem

// Outcome says how a call to [Do] got its answer.
type Outcome uint8

// Outcomes.
const (
	// NoOutcome: the call failed before it got a result (a bad key, a
	// conflict, a fingerprint mismatch, a store failure, a closed runtime).
	NoOutcome Outcome = iota
	// Executed: this call ran the function.
	Executed
	// Joined: this call waited for a run in flight and got its result.
	Joined
	// Replayed: this call got a stored result; nothing ran.
	Replayed
)

func (o Outcome) String() string {
	switch o {
	case Executed:
		return "executed"
	case Joined:
		return "joined"
	case Replayed:
		return "replayed"
	}
	return "none"
}
