package registry

// Derived returns what other layers compute from k and cache with it (the REST handler's
// field managers, for instance), building it with build the first time key is asked for.
// The value goes away with the Kind: a CRD's new generation is a new Kind and starts
// afresh. build may run more than once under contention; one result wins.
func (k *Kind) Derived(key any, build func() any) any {
	if v, ok := k.derived.Load(key); ok {
		return v
	}
	v, _ := k.derived.LoadOrStore(key, build())
	return v
}
